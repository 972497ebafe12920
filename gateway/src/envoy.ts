// The Envoy v3 bootstrap of a deployment, rendered from the route table: Envoy does in Kubernetes
// what the local router (router.ts) does for `npm run cluster`, with the same routes, the same
// documents and headers, the same client address rules and the same problem documents.
import { isIP } from 'node:net';
import { type PublicUrls, publicUrls } from '@agentroom/kit/config';
import { corsHeaders, corsPreflightHeaders } from '@agentroom/kit/http';
import { Document as YamlDocument, isScalar, visit } from 'yaml';
import { DOCUMENT_INDEX, luaLiteral } from './document-files.js';
import { CATCH_ALL, resolveRoutes, type ResolvedRoute, ROUTES, type Route } from './routes.js';

/** A JSON value: what the bootstrap is made of. */
export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

/** One upstream endpoint: a host name (a Kubernetes Service, resolved to its pods) or an IP, with its ports. */
export interface Endpoint {
  host: string;
  port: number;
  /** Where the process answers `GET /readyz` (its ADMIN_PORT). */
  healthCheckPort: number;
}

export interface EnvoyOptions {
  urls: PublicUrls;
  /**
   * Where `render.js docs` wrote the gateway's documents and their index, as Envoy sees it: Envoy
   * answers them itself, whichever they are (docs/decisions.md §31).
   */
  docsDir: string;
  listen: { address: string; port: number };
  /** Envoy's admin interface (`/ready` for probes, stats); reachable by anyone who reaches this address. */
  admin: { address: string; port: number };
  edge: readonly Endpoint[];
  auth: readonly Endpoint[];
  /**
   * Edge's `QUOTA_PER_ADDRESS`: Envoy's own answers show it whole in their RateLimit headers (default
   * 5,000). A string is a placeholder the chart's ConfigMap fills from its values.
   */
  quotaLimit?: number | string;
  /** The coarse guard over everything this Envoy takes: a token bucket, refilled every second. */
  rateLimit?: { perSecond: number; burst: number };
  /** How long a request that is not a stream may wait for its whole answer (default 30 s). */
  upstreamTimeoutSeconds?: number;
  /** How long a stream (SSE, MCP, A2A) may stay silent before it is cut (default 6 minutes). */
  streamIdleTimeoutSeconds?: number;
  /** As the router's HEADERS_TIMEOUT_MS and REQUEST_TIMEOUT_MS (default 10 s and 30 s). */
  headersTimeoutMs?: number;
  requestTimeoutMs?: number;
  /** Open client connections at most (default 50,000). */
  maxConnections?: number;
  /**
   * Proxies in front of Envoy whose X-Forwarded-For entry is believed: 0 when Envoy is the public
   * edge (the default), 1 behind one ingress controller or load balancer that appends the client's address.
   */
  trustedProxyHops?: number | string;
  /** Envoy's spans and the W3C trace context it sends upstream; without it, Envoy traces nothing. */
  tracing?: EnvoyTracing;
}

/**
 * Envoy's OpenTelemetry tracer (docs/decisions.md §50): the first span of each sampled request, sent
 * to an OTLP receiver, and a `traceparent` to edge or auth that the services' spans continue.
 */
export interface EnvoyTracing {
  /** OTLP over HTTP (`http/protobuf`, POSTed to `path`) or over gRPC, as OTEL_EXPORTER_OTLP_PROTOCOL says. */
  protocol: 'http/protobuf' | 'grpc';
  /** The receiver, over plain HTTP: a host name or an IP, and its port (a string is a placeholder the chart fills). */
  host: string;
  port: number | string;
  /** OTLP over HTTP: the URL spans are POSTed to on that receiver, `/v1/traces` below its base URL. */
  tracesUrl: string;
  /**
   * The share of new traces sampled here, in millionths (0 to 1,000,000), by their trace id as the
   * services' `parentbased_traceidratio` does; a request that comes with a `traceparent` keeps its
   * own decision. A string is a placeholder the chart fills.
   */
  samplingPerMillion: number | string;
}

export const ENVOY_DEFAULTS = {
  quotaLimit: 5_000,
  rateLimit: { perSecond: 1_000, burst: 2_000 },
  upstreamTimeoutSeconds: 30,
  // Longer than the longest heartbeat a live stream may be configured with (LIVE_HEARTBEAT_MS, at most 300 s).
  streamIdleTimeoutSeconds: 360,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  maxConnections: 50_000,
} as const;

/** Node's default, which the router and the services keep: larger request headers get 431. */
const MAX_REQUEST_HEADERS_KB = 16;
/** Node's default count of request headers (`maxHeadersCount`); Envoy's own default is 100. */
const MAX_REQUEST_HEADERS_COUNT = 2_000;
/**
 * Upstream connections are dropped after this long unused: under Node's `keepAliveTimeout` (5 s) in
 * edge and auth, so Envoy never sends a request on a connection that Node is closing.
 */
const UPSTREAM_IDLE_SECONDS = 4;
/** What Envoy's own 503 asks a client to wait. */
const RETRY_AFTER_SECONDS = 5;
/** A header set before anything else runs, carrying a fresh id in case the client's must be replaced. */
const FRESH_ID_HEADER = 'x-gateway-fresh-request-id';
/** The Lua filter that answers the documents, on the gateway's routes only, and its source's name there. */
const DOCUMENTS_FILTER = 'agent-room.documents';
const DOCUMENTS_SOURCE = 'documents';

const TYPE = {
  hcm: 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
  router: 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router',
  lua: 'type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua',
  luaPerRoute: 'type.googleapis.com/envoy.extensions.filters.http.lua.v3.LuaPerRoute',
  localRateLimit: 'type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit',
  stdout: 'type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog',
  earlyHeaderMutation: 'type.googleapis.com/envoy.extensions.http.early_header_mutation.header_mutation.v3.HeaderMutation',
  uuid: 'type.googleapis.com/envoy.extensions.request_id.uuid.v3.UuidRequestIdConfig',
  httpOptions: 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
  previousHosts: 'type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate',
  connections: 'type.googleapis.com/envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig',
  openTelemetry: 'type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig',
  parentBased: 'type.googleapis.com/envoy.extensions.tracers.opentelemetry.samplers.v3.ParentBasedSamplerConfig',
  traceIdRatio: 'type.googleapis.com/envoy.extensions.tracers.opentelemetry.samplers.v3.TraceIdRatioBasedSamplerConfig',
} as const;

/** The cluster Envoy sends its spans to, when it traces. */
const OTLP_CLUSTER = 'otlp';
/** The name Envoy's spans carry (`service.name`), as each service's carry its own. */
const TRACING_SERVICE_NAME = 'envoy';

/** A problem Envoy answers itself: `about:blank`, since no service is there to name it (docs/decisions.md §2); as the router's. */
function ownProblem(status: number, title: string, remedy: string, code: string, extra: JsonObject = {}): JsonObject {
  return { type: 'about:blank', title, status, code, remedy, ...extra };
}

function seconds(value: number): string {
  return `${Number(value.toFixed(3))}s`;
}

/** A header to set; without `action`, added (Envoy's default, for headers the answer does not have yet). */
function header(key: string, value: string, action?: 'OVERWRITE_IF_EXISTS_OR_ADD' | 'ADD_IF_ABSENT'): JsonObject {
  return { header: { key: key.toLowerCase(), value }, ...(action === undefined ? {} : { append_action: action }) };
}

function methods(regex: string): Json[] {
  return [{ name: ':method', string_match: { safe_regex: { regex } } }];
}

const READS = '^(GET|HEAD)$';

/**
 * Runs first on every request and last on every answer, Envoy's own included:
 * - a client's request id is kept when it is short and printable, as the services'
 *   `requestIdFrom` does; otherwise it is replaced by the fresh one set before routing;
 * - an answer without RateLimit headers is one of Envoy's own (a document, a refusal, a failure),
 *   which counted no call: it shows the full daily allowance, reset at the next UTC midnight, as the
 *   router's own answers do (docs/decisions.md §6).
 */
function luaSource(quotaLimit: number | string): string {
  return `-- Rendered by gateway/src/envoy.ts.
local FRESH = "${FRESH_ID_HEADER}"
local LIMIT = "${quotaLimit}"

function envoy_on_request(handle)
  local headers = handle:headers()
  local id = headers:get("x-request-id")
  local fresh = headers:get(FRESH)
  headers:remove(FRESH)
  if fresh ~= nil and (id == nil or #id > 128 or string.find(id, "^[A-Za-z0-9._:%-]+$") == nil) then
    headers:replace("x-request-id", fresh)
  end
end

function envoy_on_response(handle)
  local headers = handle:headers()
  if headers:get("ratelimit-limit") == nil then
    headers:replace("ratelimit-limit", LIMIT)
    headers:replace("ratelimit-remaining", LIMIT)
    headers:replace("ratelimit-reset", tostring(86400 - os.time() % 86400))
  end
end
`;
}

/** Lower-case header names, as Lua tables of the answers. */
function lowerCased(values: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(values).map(([key, value]) => [key.toLowerCase(), value]));
}

/**
 * Answers the gateway's documents on the table's gateway routes, as the router's serveDocument and
 * kit's sendStatic do (docs/decisions.md §25, §31), from the files and the index `render.js docs`
 * writes: by prefix, whichever documents there are, so that this bootstrap holds none of them.
 */
function documentsLuaSource(docsDir: string): string {
  const allow = { allow: 'GET, HEAD' };
  const methodNotAllowed = JSON.stringify(
    ownProblem(
      405,
      'Method not allowed',
      'Use GET (or HEAD) on this document; every URL is listed in the manifest, /.well-known/ai-agent.json.',
      'invalid_request',
    ),
  );
  return `-- Rendered by gateway/src/envoy.ts.
local DIR = ${luaLiteral(docsDir.replace(/\/$/, ''))}
local INDEX = ${luaLiteral(DOCUMENT_INDEX)}
local CORS = ${luaLiteral(lowerCased(corsHeaders()))}
local PREFLIGHT = ${luaLiteral(lowerCased({ ...corsPreflightHeaders(), ...allow }))}
local REFUSED = ${luaLiteral({ ...allow, 'content-type': 'application/problem+json' })}
local METHOD_NOT_ALLOWED = ${luaLiteral(methodNotAllowed)}

-- The index, read when Envoy loads this script: without it, or without a file it names, Envoy
-- refuses the bootstrap. Run with no globals: it can only make tables.
local function readIndex()
  local chunk, failure = loadfile(DIR .. "/" .. INDEX)
  if chunk == nil then
    error("the gateway's documents are missing (" .. failure .. "): write them with node gateway/dist/render.js docs --out " .. DIR)
  end
  setfenv(chunk, {})
  local index = chunk()
  for _, document in pairs(index) do
    for _, form in pairs(document.codings) do
      local file = io.open(DIR .. "/" .. form.file, "rb")
      if file == nil then error("the gateway's document file " .. DIR .. "/" .. form.file .. " is missing") end
      file:close()
    end
  end
  return index
end
local DOCUMENTS = readIndex()

-- A file's bytes, read when first asked for, then kept (by each worker).
local bodies = {}
local function bodyOf(name)
  local body = bodies[name]
  if body == nil then
    local file = assert(io.open(DIR .. "/" .. name, "rb"))
    body = file:read("*a")
    file:close()
    bodies[name] = body
  end
  return body
end

local function merged(...)
  local all = {}
  for _, headers in ipairs({ ... }) do
    for key, value in pairs(headers) do all[key] = value end
  end
  return all
end

local function trim(text)
  return (string.gsub(text, "^%s*(.-)%s*$", "%1"))
end

-- The q-value of each coding in an Accept-Encoding, as the router's negotiateCoding (negotiator)
-- reads it: an exact entry before "*", identity at the lowest q listed unless named or "*"; the highest
-- q wins, br before gzip before identity on a tie; identity when nothing is acceptable.
local function negotiate(accept)
  if accept == nil then return "identity" end
  local exact, any, lowest = {}, nil, 1
  for entry in string.gmatch(accept, "[^,]+") do
    local name, params = string.match(entry, "^%s*([^;%s]+)%s*(.*)$")
    if name ~= nil then
      name = string.lower(name)
      local q = 1
      local value = string.match(params, ";%s*[qQ]%s*=%s*([^;%s]+)")
      if value ~= nil then q = tonumber(value) or 0 end
      -- As negotiator: an entry refused (q=0) leaves identity's implicit q alone.
      if q > 0 and q < lowest then lowest = q end
      if name == "*" then
        if any == nil or q > any then any = q end
      elseif exact[name] == nil or q > exact[name] then
        exact[name] = q
      end
    end
  end
  local function weight(coding)
    if exact[coding] ~= nil then return exact[coding] end
    if any ~= nil then return any end
    if coding == "identity" then return lowest end
    return 0
  end
  local best, chosen = 0, "identity"
  for _, coding in ipairs({ "br", "gzip", "identity" }) do
    local q = weight(coding)
    if q > best then best, chosen = q, coding end
  end
  return chosen
end

-- As kit's holdsTag: If-None-Match is "*" or names this ETag, compared weakly.
local function holds(header, etag)
  if header == nil then return false end
  if trim(header) == "*" then return true end
  for tag in string.gmatch(header, "[^,]+") do
    if (string.gsub(trim(tag), "^W/", "")) == etag then return true end
  end
  return false
end

local function unescape(text)
  return (string.gsub((string.gsub(text, "%+", " ")), "%%(%x%x)", function(hex) return string.char(tonumber(hex, 16)) end))
end

-- As sendStatic's URLSearchParams: the first v of the query, the version a link asked for.
local function versionAsked(target)
  local query = string.match(target, "%?(.*)$")
  if query == nil then return nil end
  for pair in string.gmatch(query, "[^&]+") do
    local key, value = string.match(pair, "^([^=]*)=?(.*)$")
    if unescape(key) == "v" then return unescape(value) end
  end
  return nil
end

-- The preflight; 405 but for GET and HEAD; else the coding chosen, 304 when the client holds it
-- (with the validator and caching headers only), the bytes otherwise (HEAD: Envoy sends none).
local function serve(handle, headers, document, target)
  local method = headers:get(":method")
  if method == "OPTIONS" then
    handle:respond(merged(CORS, PREFLIGHT, { [":status"] = "204" }), "")
  elseif method ~= "GET" and method ~= "HEAD" then
    handle:respond(merged(CORS, REFUSED, { [":status"] = "405" }), METHOD_NOT_ALLOWED)
  else
    local coding = "identity"
    if document.codings.br ~= nil then coding = negotiate(headers:get("accept-encoding")) end
    local form = document.codings[coding]
    local caching = {}
    if versionAsked(target) == document.digest then caching["cache-control"] = document.versioned end
    if holds(headers:get("if-none-match"), form.headers.etag) then
      local unchanged = merged(CORS, form.headers, caching, { [":status"] = "304" })
      unchanged["content-encoding"] = nil
      handle:respond(unchanged, "")
    else
      handle:respond(merged(CORS, document.content, form.headers, caching, { [":status"] = "200" }), bodyOf(form.file))
    end
  end
end

-- On the table's gateway routes alone, as the router matches them; a path there with no document
-- goes on to edge, which answers the 404.
function envoy_on_request(handle)
  local headers = handle:headers()
  local target = headers:get(":path") or ""
  local document = DOCUMENTS[string.match(target, "^[^?]*")]
  if document ~= nil then serve(handle, headers, document, target) end
end
`;
}

/** Envoy's own failures and refusals, as problem documents (first match wins). */
function localReplies(): JsonObject {
  const status = (code: number): JsonObject => ({
    status_code_filter: { comparison: { op: 'EQ', value: { default_value: code, runtime_key: `problem_${code}` } } },
  });
  const problem = (body: JsonObject): JsonObject => ({ json_format: body, content_type: 'application/problem+json' });
  // A request that never became one (headers too large) has no id yet: it gets a fresh one here.
  const requestId = header('x-request-id', '%UNIQUE_ID%', 'ADD_IF_ABSENT');
  return {
    mappers: [
      {
        filter: status(431),
        headers_to_add: [requestId],
        body_format_override: problem(
          ownProblem(
            431,
            'The request headers are too large',
            'Send at most 16 KiB of request headers: drop cookies and headers this API does not read, and send the token once, as Authorization: Bearer <token>.',
            'invalid_request',
          ),
        ),
      },
      {
        filter: status(408),
        headers_to_add: [requestId],
        body_format_override: problem(ownProblem(408, 'The request took too long to arrive', 'Send the whole request at once, then retry.', 'invalid_request')),
      },
      {
        // The coarse guard (local_ratelimit) refused it: it is a safety net, far above any client's quota.
        filter: status(429),
        headers_to_add: [requestId, header('retry-after', '1', 'OVERWRITE_IF_EXISTS_OR_ADD')],
        body_format_override: problem(
          ownProblem(429, 'Too many requests through the gateway', 'Retry after `Retry-After` seconds, with exponential backoff.', 'rate_limited', {
            retry_after: 1,
          }),
        ),
      },
      {
        filter: status(400),
        headers_to_add: [requestId],
        body_format_override: problem(
          ownProblem(
            400,
            'The request is not valid HTTP',
            'Send a well-formed HTTP/1.1 request: a request line such as GET /api/v1/posts HTTP/1.1, then headers as Name: value, each line ending in CRLF.',
            'invalid_request',
          ),
        ),
      },
      {
        // Every failure on the way to a service (no healthy endpoint, a refused or reset connection,
        // an overflow, a timeout) is one answer, as the router gives: the service is unavailable, retry.
        filter: { status_code_filter: { comparison: { op: 'GE', value: { default_value: 500, runtime_key: 'problem_5xx' } } } },
        status_code: 503,
        headers_to_add: [requestId, header('retry-after', String(RETRY_AFTER_SECONDS), 'OVERWRITE_IF_EXISTS_OR_ADD')],
        body_format_override: problem(
          ownProblem(503, 'The service behind the gateway is unavailable', 'Retry in a few seconds with exponential backoff.', 'internal', {
            retry_after: RETRY_AFTER_SECONDS,
          }),
        ),
      },
      {
        // Any other refusal of Envoy's own (it carries a response flag; the documents' answers carry none).
        filter: { response_flag_filter: {} },
        headers_to_add: [requestId],
        body_format_override: problem({
          type: 'about:blank',
          title: 'The gateway refused the request',
          status: '%RESPONSE_CODE%',
          code: 'invalid_request',
          remedy: 'Check the request against the manifest, /.well-known/ai-agent.json, and the OpenAPI document, then retry.',
        }),
      },
    ],
  };
}

/** One JSON line per answer, the request id first among equals, as the services log theirs. */
function accessLog(traced: boolean): Json[] {
  return [
    {
      name: 'envoy.access_loggers.stdout',
      typed_config: {
        '@type': TYPE.stdout,
        log_format: {
          json_format: {
            time: '%START_TIME%',
            level: 'info',
            service: 'envoy',
            requestId: '%REQ(X-REQUEST-ID)%',
            // The trace id Envoy passed on (sampled or not), as the services' lines carry theirs.
            ...(traced ? { traceId: '%TRACE_ID%' } : {}),
            // The path without its query, which may carry a device code.
            msg: '%REQ(:METHOD)% %PATH(NQ:PATH)% %RESPONSE_CODE% %DURATION% ms',
            http: { method: '%REQ(:METHOD)%', path: '%PATH(NQ:PATH)%', status: '%RESPONSE_CODE%', durationMs: '%DURATION%' },
            route: '%ROUTE_NAME%',
            upstream: { cluster: '%UPSTREAM_CLUSTER%', host: '%UPSTREAM_HOST%' },
            responseFlags: '%RESPONSE_FLAGS%',
            details: '%RESPONSE_CODE_DETAILS%',
          },
        },
      },
    },
  ];
}

interface RenderContext {
  options: EnvoyOptions;
  routes: readonly ResolvedRoute[];
  upstreamTimeout: string;
  streamIdleTimeout: string;
}

function forward(name: string, match: JsonObject, upstream: 'edge' | 'auth', streaming: boolean, context: RenderContext): JsonObject {
  // A stream lasts as long as its client stays: no deadline on the whole answer, only on silence.
  const timeouts: JsonObject = streaming ? { timeout: '0s', idle_timeout: context.streamIdleTimeout } : { timeout: context.upstreamTimeout };
  return { name, match, route: { cluster: upstream, ...timeouts } };
}

function matchOf(route: Pick<ResolvedRoute, 'match' | 'path'>): JsonObject {
  return route.match === 'exact' ? { path: route.path } : { prefix: route.path };
}

/**
 * A route of the table whose upstream is the gateway: the documents' Lua filter, off elsewhere, runs
 * here and answers every document under it; any other path goes to the catch-all, which answers
 * the 404 problem, as the router does. No route names a document.
 */
function gatewayRoute(route: ResolvedRoute, context: RenderContext): JsonObject {
  return {
    ...forward(`documents at ${route.path}`, matchOf(route), CATCH_ALL, false, context),
    typed_per_filter_config: { [DOCUMENTS_FILTER]: { '@type': TYPE.luaPerRoute, name: DOCUMENTS_SOURCE } },
  };
}

function routesFor(routes: readonly ResolvedRoute[], context: RenderContext): JsonObject[] {
  const rendered = routes.flatMap((route) =>
    route.upstream === 'gateway'
      ? [gatewayRoute(route, context)]
      : [forward(`${route.upstream} ${route.path}`, matchOf(route), route.upstream, route.streaming, context)],
  );
  // Unmatched: edge answers the 404 problem with RateLimit headers.
  rendered.push(forward(`${CATCH_ALL} (unmatched)`, { prefix: '/' }, CATCH_ALL, false, context));
  return rendered;
}

/** Retries only where repeating cannot do harm: reads (GET, HEAD) that failed before any answer began, on another endpoint. */
const RETRY_POLICY: JsonObject = {
  retry_on: 'connect-failure,refused-stream,reset',
  num_retries: 2,
  retriable_request_headers: methods(READS),
  retry_host_predicate: [{ name: 'envoy.retry_host_predicates.previous_hosts', typed_config: { '@type': TYPE.previousHosts } }],
  host_selection_retry_max_attempts: 3,
};

/**
 * Site and API on one host: one virtual host takes every request, routed by path. Apart: one per
 * host (the site's routes on the site's host, the API's on the API's), and any other host gets the
 * catch-all, as `resolveRoutes` and `matchRoute` place them.
 */
function virtualHosts(context: RenderContext): Json[] {
  const hosts = [...new Set(context.routes.map((route) => route.host))];
  const vhost = (name: string, domains: string[], routes: JsonObject[]): JsonObject => ({ name, domains, routes, retry_policy: RETRY_POLICY });
  if (hosts.length === 1 && hosts[0] === undefined) return [vhost('public', ['*'], routesFor(context.routes, context))];
  return [
    ...hosts.map((host) => {
      if (host === undefined) throw new Error('a route without a host among routes with hosts');
      return vhost(
        host,
        [host],
        routesFor(
          context.routes.filter((route) => route.host === host),
          context,
        ),
      );
    }),
    vhost('any other host', ['*'], routesFor([], context)),
  ];
}

function httpConnectionManager(context: RenderContext): JsonObject {
  const { options } = context;
  const rateLimit = options.rateLimit ?? ENVOY_DEFAULTS.rateLimit;
  const everyone = { default_value: { numerator: 100, denominator: 'HUNDRED' } };
  return {
    '@type': TYPE.hcm,
    stat_prefix: 'public',
    codec_type: 'AUTO',
    // Envoy is the public edge: the client is the socket's peer (or what the trusted proxies in front
    // of it say), never what a header from the client claims.
    use_remote_address: true,
    xff_num_trusted_hops: options.trustedProxyHops ?? 0,
    // A client's X-Request-Id is kept (when valid, see the Lua filter); one is made when absent, and
    // every answer carries it. Ids are left as they are (no trace bits packed in).
    preserve_external_request_id: true,
    always_set_request_id_in_response: true,
    request_id_extension: { typed_config: { '@type': TYPE.uuid, pack_trace_reason: false, use_request_id_for_trace_sampling: false } },
    early_header_mutation_extensions: [
      {
        name: 'envoy.http.early_header_mutation.header_mutation',
        typed_config: { '@type': TYPE.earlyHeaderMutation, mutations: [{ append: header(FRESH_ID_HEADER, '%UNIQUE_ID%', 'OVERWRITE_IF_EXISTS_OR_ADD') }] },
      },
    ],
    // No `server: envoy`: upstreams' answers go as they came, Envoy's own carry none.
    server_header_transformation: 'PASS_THROUGH',
    normalize_path: true,
    max_request_headers_kb: MAX_REQUEST_HEADERS_KB,
    common_http_protocol_options: { max_headers_count: MAX_REQUEST_HEADERS_COUNT, idle_timeout: '65s' },
    // Slow clients (docs/decisions.md §6): the headers within 10 s, the whole request within 30 s, else 408.
    request_headers_timeout: seconds((options.headersTimeoutMs ?? ENVOY_DEFAULTS.headersTimeoutMs) / 1000),
    request_timeout: seconds((options.requestTimeoutMs ?? ENVOY_DEFAULTS.requestTimeoutMs) / 1000),
    access_log: accessLog(options.tracing !== undefined),
    ...(options.tracing === undefined ? {} : { tracing: hcmTracing(options.tracing) }),
    local_reply_config: localReplies(),
    http_filters: [
      {
        name: 'envoy.filters.http.lua',
        typed_config: { '@type': TYPE.lua, default_source_code: { inline_string: luaSource(options.quotaLimit ?? ENVOY_DEFAULTS.quotaLimit) } },
      },
      {
        name: 'envoy.filters.http.local_ratelimit',
        typed_config: {
          '@type': TYPE.localRateLimit,
          stat_prefix: 'public_guard',
          token_bucket: { max_tokens: rateLimit.burst, tokens_per_fill: rateLimit.perSecond, fill_interval: '1s' },
          filter_enabled: { ...everyone, runtime_key: 'public_guard_enabled' },
          filter_enforced: { ...everyone, runtime_key: 'public_guard_enforced' },
        },
      },
      // After the guard, which counts the documents' requests too; off but on the gateway's routes.
      {
        name: DOCUMENTS_FILTER,
        disabled: true,
        typed_config: { '@type': TYPE.lua, source_codes: { [DOCUMENTS_SOURCE]: { inline_string: documentsLuaSource(options.docsDir) } } },
      },
      // No x-envoy-* headers to upstreams or clients: they are Envoy's business.
      { name: 'envoy.filters.http.router', typed_config: { '@type': TYPE.router, suppress_envoy_headers: true } },
    ],
    route_config: {
      name: 'routes',
      // As the router's stampForwarding: X-Forwarded-For is the client's address alone (a client's own
      // is dropped, not appended to), so edge and auth, trusting the proxy hop they get it from, see
      // the real client, and no client can claim another address.
      request_headers_to_add: [
        header('x-forwarded-for', '%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%', 'OVERWRITE_IF_EXISTS_OR_ADD'),
        header('x-forwarded-host', '%REQ(:AUTHORITY)%', 'OVERWRITE_IF_EXISTS_OR_ADD'),
      ],
      request_headers_to_remove: ['x-envoy-external-address'],
      virtual_hosts: virtualHosts(context),
    },
  };
}

/**
 * The connection manager's tracing: a sampled request gets Envoy's server span, a client span for
 * its call to edge or auth, and a W3C `traceparent` on that call. The tracer's own sampler decides,
 * as the services' SDK does (`parentbased_traceidratio`): the decision of a `traceparent` the
 * request brings, else its trace id against the ratio. Not the connection manager's
 * `random_sampling`, which works from the request id: with ids left as clients send them, every
 * request would be traced (docs/decisions.md §50).
 */
function hcmTracing(tracing: EnvoyTracing): JsonObject {
  const exporter: JsonObject =
    tracing.protocol === 'grpc'
      ? { grpc_service: { envoy_grpc: { cluster_name: OTLP_CLUSTER }, timeout: '5s' } }
      : {
          http_service: {
            http_uri: { uri: tracing.tracesUrl, cluster: OTLP_CLUSTER, timeout: '5s' },
          },
        };
  return {
    provider: {
      name: 'envoy.tracers.opentelemetry',
      typed_config: {
        '@type': TYPE.openTelemetry,
        service_name: TRACING_SERVICE_NAME,
        ...exporter,
        sampler: {
          name: 'envoy.tracers.opentelemetry.samplers.parent_based',
          typed_config: {
            '@type': TYPE.parentBased,
            wrapped_sampler: {
              name: 'envoy.tracers.opentelemetry.samplers.trace_id_ratio_based',
              typed_config: {
                '@type': TYPE.traceIdRatio,
                sampling_percentage: { numerator: tracing.samplingPerMillion, denominator: 'MILLION' },
              },
            },
          },
        },
      },
    },
    spawn_upstream_span: true,
    // The request id the access log and the services' log lines carry, on Envoy's span (OpenTelemetry's name for a captured header).
    custom_tags: [{ tag: 'http.request.header.x-request-id', request_header: { name: 'x-request-id' } }],
  };
}

/** The OTLP receiver: spans only, a few connections, resolved again every 5 s when it is a name. */
function otlpCluster(tracing: EnvoyTracing): JsonObject {
  const resolved = isIP(tracing.host) !== 0;
  return {
    name: OTLP_CLUSTER,
    type: resolved ? 'STATIC' : 'STRICT_DNS',
    ...(resolved ? {} : { dns_lookup_family: 'V4_PREFERRED' }),
    connect_timeout: '2s',
    load_assignment: {
      cluster_name: OTLP_CLUSTER,
      endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: tracing.host, port_value: tracing.port } } } }] }],
    },
    ...(tracing.protocol === 'grpc'
      ? {
          typed_extension_protocol_options: {
            'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': { '@type': TYPE.httpOptions, explicit_http_config: { http2_protocol_options: {} } },
          },
        }
      : {}),
  };
}

function cluster(name: 'edge' | 'auth', endpoints: readonly Endpoint[], maxConnections: number): JsonObject {
  if (endpoints.length === 0) throw new Error(`no ${name} endpoint to send to`);
  // IPs need no resolving; a name (a headless Kubernetes Service) is looked up every 5 s (Envoy's
  // default), each address it answers an endpoint of its own.
  const resolved = endpoints.every((endpoint) => isIP(endpoint.host) !== 0);
  return {
    name,
    type: resolved ? 'STATIC' : 'STRICT_DNS',
    ...(resolved ? {} : { dns_lookup_family: 'V4_PREFERRED' }),
    connect_timeout: '2s',
    // Long streams stay on their endpoint: the least busy one takes the next request.
    lb_policy: 'LEAST_REQUEST',
    per_connection_buffer_limit_bytes: 32_768,
    load_assignment: {
      cluster_name: name,
      endpoints: [
        {
          lb_endpoints: endpoints.map((endpoint) => ({
            endpoint: {
              address: { socket_address: { address: endpoint.host, port_value: endpoint.port } },
              health_check_config: { port_value: endpoint.healthCheckPort },
            },
          })),
        },
      ],
    },
    // A pod that says it is not ready (starting, draining after SIGTERM, a dependency down) gets no new requests.
    health_checks: [
      {
        timeout: '1s',
        interval: '5s',
        no_traffic_interval: '5s',
        unhealthy_threshold: 2,
        healthy_threshold: 1,
        http_health_check: { path: '/readyz' },
      },
    ],
    // A pod gone from DNS leaves at once, whatever its last health check said.
    ignore_health_on_host_removal: true,
    // An endpoint that keeps failing (refused connections, 502/503/504) is set aside for a while.
    outlier_detection: {
      consecutive_gateway_failure: 3,
      enforcing_consecutive_gateway_failure: 100,
      consecutive_5xx: 5,
      interval: '5s',
      base_ejection_time: '15s',
      max_ejection_percent: 50,
    },
    // Every live stream holds one upstream request: the defaults (1,024) would refuse streams long
    // before the listener's connection limit.
    circuit_breakers: {
      thresholds: [
        {
          priority: 'DEFAULT',
          max_connections: maxConnections,
          max_requests: maxConnections,
          max_pending_requests: 1_024,
          retry_budget: { budget_percent: { value: 20 }, min_retry_concurrency: 10 },
        },
      ],
    },
    typed_extension_protocol_options: {
      'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
        '@type': TYPE.httpOptions,
        common_http_protocol_options: { idle_timeout: `${UPSTREAM_IDLE_SECONDS}s` },
        explicit_http_config: { http_protocol_options: {} },
      },
    },
  };
}

/** The bootstrap, as a plain object (write it with `envoyYaml`). */
export function envoyBootstrap(options: EnvoyOptions, table: readonly Route[] = ROUTES): JsonObject {
  const context: RenderContext = {
    options,
    routes: resolveRoutes(options.urls, table),
    upstreamTimeout: seconds(options.upstreamTimeoutSeconds ?? ENVOY_DEFAULTS.upstreamTimeoutSeconds),
    streamIdleTimeout: seconds(options.streamIdleTimeoutSeconds ?? ENVOY_DEFAULTS.streamIdleTimeoutSeconds),
  };
  const maxConnections = options.maxConnections ?? ENVOY_DEFAULTS.maxConnections;
  return {
    node: { id: 'agent-room-gateway', cluster: 'agent-room' },
    // Envoy's own log lines as JSON, like every other process's.
    application_log_config: { log_format: { json_format: { time: '%Y-%m-%dT%T.%eZ', level: '%l', service: 'envoy', logger: '%n', msg: '%j' } } },
    admin: { address: { socket_address: { address: options.admin.address, port_value: options.admin.port } } },
    static_resources: {
      listeners: [
        {
          name: 'public',
          address: { socket_address: { address: options.listen.address, port_value: options.listen.port } },
          per_connection_buffer_limit_bytes: 32_768,
          filter_chains: [{ filters: [{ name: 'envoy.filters.network.http_connection_manager', typed_config: httpConnectionManager(context) }] }],
        },
      ],
      clusters: [
        cluster('edge', options.edge, maxConnections),
        cluster('auth', options.auth, maxConnections),
        ...(options.tracing === undefined ? [] : [otlpCluster(options.tracing)]),
      ],
    },
    overload_manager: {
      resource_monitors: [
        {
          name: 'envoy.resource_monitors.global_downstream_max_connections',
          typed_config: { '@type': TYPE.connections, max_active_downstream_connections: maxConnections },
        },
      ],
    },
  };
}

/** The bootstrap as YAML, under a comment that says where it comes from. */
export function envoyYaml(bootstrap: JsonObject, comment: string): string {
  const document = new YamlDocument(bootstrap, { aliasDuplicateObjects: false });
  // Small objects and lists of plain values on one line each ({key: ..., value: ...}): the file stays readable.
  const plain = (node: unknown): boolean => isScalar(node) && !(typeof node.value === 'string' && node.value.includes('\n'));
  visit(document, {
    Map(_key, node) {
      if (node.items.length <= 4 && node.items.every((pair) => plain(pair.value))) node.flow = true;
    },
    Seq(_key, node) {
      if (node.items.every(plain)) node.flow = true;
    },
  });
  document.commentBefore = comment
    .split('\n')
    .map((line) => (line === '' ? '' : ` ${line}`))
    .join('\n');
  return document.toString({ lineWidth: 0, blockQuote: 'literal' });
}

/**
 * The layout the chart's bootstrap is rendered for. Only the paths count (site at `/`, API at `/api`,
 * one host for both): the documents' bytes are rendered in the pod, with the deployment's own URLs.
 */
export const CHART_URLS: PublicUrls = publicUrls({ PORT: 8080, SITE_URL: undefined, API_URL: undefined });

/** What the chart's ConfigMap replaces with `<fullname>-edge` and `<fullname>-auth`. */
export const CHART_EDGE_HOST = '__EDGE_HOST__';
export const CHART_AUTH_HOST = '__AUTH_HOST__';
/** What the chart's ConfigMap replaces with edge's `QUOTA_PER_ADDRESS` and `envoy.trustedProxyHops`. */
export const CHART_QUOTA_LIMIT = '__QUOTA_PER_ADDRESS__';
export const CHART_TRUSTED_PROXY_HOPS = '__TRUSTED_PROXY_HOPS__';
/** What the chart's ConfigMap replaces, with `tracing.enabled`, by the OTLP receiver of `tracing.otlpEndpoint` and `tracing.sampling` in millionths. */
export const CHART_OTLP_HOST = '__OTLP_HOST__';
export const CHART_OTLP_PORT = '__OTLP_PORT__';
export const CHART_OTLP_TRACES_URL = '__OTLP_TRACES_URL__';
export const CHART_SAMPLING_PER_MILLION = '__TRACING_SAMPLING_PER_MILLION__';
/** Where the chart's init container writes the documents, in the Envoy pod. */
export const CHART_DOCS_DIR = '/etc/agent-room/docs';

/**
 * The chart's bootstrap (`charts/agent-room/files/envoy.yaml`): listener 8080, admin 9901 on every
 * address (the kubelet probes `/ready` on the pod's IP), edge on 8080 and auth on 8081 of their
 * Services' pods, each checked at `/readyz` on 9090. Rendered for the layout the chart deploys: site
 * and API on one host, the API at `/api` (SITE_URL=https://host, API_URL=https://host/api).
 */
export function chartBootstrap(traced = false): JsonObject {
  return envoyBootstrap({
    urls: CHART_URLS,
    docsDir: CHART_DOCS_DIR,
    listen: { address: '0.0.0.0', port: 8080 },
    admin: { address: '0.0.0.0', port: 9901 },
    edge: [{ host: CHART_EDGE_HOST, port: 8080, healthCheckPort: 9090 }],
    auth: [{ host: CHART_AUTH_HOST, port: 8081, healthCheckPort: 9090 }],
    quotaLimit: CHART_QUOTA_LIMIT,
    trustedProxyHops: CHART_TRUSTED_PROXY_HOPS,
    // The chart speaks OTLP over HTTP, the services' default protocol, to the one receiver they share.
    ...(traced
      ? {
          tracing: {
            protocol: 'http/protobuf',
            host: CHART_OTLP_HOST,
            port: CHART_OTLP_PORT,
            tracesUrl: CHART_OTLP_TRACES_URL,
            samplingPerMillion: CHART_SAMPLING_PER_MILLION,
          },
        }
      : {}),
  });
}

/** The chart's bootstrap with its placeholders filled as the ConfigMap fills them (for checks). */
export function fillChartPlaceholders(
  yaml: string,
  values: {
    edgeHost: string;
    authHost: string;
    quotaLimit: number;
    trustedProxyHops: number;
    otlp?: { host: string; port: number; tracesUrl: string; samplingPerMillion: number };
  },
): string {
  const otlp = values.otlp;
  const traced =
    otlp === undefined
      ? yaml
      : yaml
          .replaceAll(CHART_OTLP_TRACES_URL, otlp.tracesUrl)
          .replaceAll(CHART_OTLP_HOST, otlp.host)
          .replaceAll(CHART_OTLP_PORT, String(otlp.port))
          .replaceAll(CHART_SAMPLING_PER_MILLION, String(otlp.samplingPerMillion));
  return traced
    .replaceAll(CHART_EDGE_HOST, values.edgeHost)
    .replaceAll(CHART_AUTH_HOST, values.authHost)
    .replaceAll(CHART_QUOTA_LIMIT, String(values.quotaLimit))
    .replaceAll(CHART_TRUSTED_PROXY_HOPS, String(values.trustedProxyHops));
}

/** Where the chart's bootstrap lives, from the repository's root. */
export const CHART_ENVOY_FILE = 'charts/agent-room/files/envoy.yaml';
/** The same with Envoy's tracer, which the ConfigMap takes instead with `tracing.enabled`; beside it. */
export const CHART_ENVOY_TRACING_FILE = 'charts/agent-room/files/envoy-tracing.yaml';

/**
 * A chart's bootstrap file, as `npm run render:envoy` writes it: without tracing, or with it
 * (docs/decisions.md §50: one file each, so that the untraced one stays as it was).
 */
export function chartEnvoyYaml(traced = false): string {
  return envoyYaml(
    chartBootstrap(traced),
    [
      'Envoy bootstrap of the Agent Room chart: the public gateway, rendered from the route table',
      '(gateway/src/routes.ts) by gateway/src/envoy.ts. Do not edit: run `npm run render:envoy`.',
      "The ConfigMap fills the upper-case placeholders: the edge and auth Services, edge's per-address",
      "quota (for Envoy's own RateLimit headers) and how many proxies in front of Envoy are trusted.",
      `The documents are files in ${CHART_DOCS_DIR} with their index, written in the pod by`,
      '`node gateway/dist/render.js docs`: this file names none of them (docs/decisions.md §31).',
      ...(traced
        ? [
            "With Envoy's OpenTelemetry tracer: the ConfigMap takes this file instead of envoy.yaml when",
            'tracing.enabled, and fills the OTLP receiver of tracing.otlpEndpoint and tracing.sampling (docs/decisions.md §50).',
          ]
        : []),
    ].join('\n'),
  );
}
