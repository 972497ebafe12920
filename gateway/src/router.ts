import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse, Agent as HttpAgent, request as httpRequest } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { corsHeaders, corsPreflightHeaders, REQUEST_ID_HEADER, requestIdFrom, type Logger, uncountedQuota } from '@agentroom/kit';
import { CATCH_ALL, matchRoute, type ResolvedRoute, type Upstream } from './routes.js';
import type { Document } from './discovery.js';

/** An upstream is served in this process (embedded mode) or by replicas over HTTP (cluster mode). */
export type Target = { kind: 'local'; handler: RequestListener } | { kind: 'remote'; urls: URL[] };

export interface RouterOptions {
  routes: readonly ResolvedRoute[];
  targets: Record<Exclude<Upstream, 'gateway'>, Target>;
  /** The gateway's own answers (discovery documents, the portal), by full path. */
  documents: ReadonlyMap<string, Document>;
  log: Logger;
  /**
   * The daily quota of a client without a token (`QUOTA_PER_ADDRESS`, default 5,000). The router's
   * own answers count no call, so they show it whole: `RateLimit-Remaining` = this, reset at UTC midnight.
   */
  quotaLimit?: number;
  /** How long a client may take to send the request line and headers (`HEADERS_TIMEOUT_MS`, default 10 s). */
  headersTimeoutMs?: number;
  /** How long a client may take to send the whole request (`REQUEST_TIMEOUT_MS`, default 30 s); the response is not bounded. */
  requestTimeoutMs?: number;
}

const DEFAULT_HEADERS_TIMEOUT_MS = 10_000;
const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

/** edge's default `QUOTA_PER_ADDRESS`. */
const DEFAULT_QUOTA_LIMIT = 5_000;

/**
 * The headers of every answer the router makes itself (documents, 405, 502, parser errors): a
 * request id and the RateLimit headers of a full allowance, since nothing was counted
 * (docs/decisions.md §6). The quota store lives behind edge; the router does not reach into it.
 */
function ownHeaders(limit: number, requestId: string): Record<string, string> {
  const quota = uncountedQuota(limit);
  return {
    'x-request-id': requestId,
    'ratelimit-limit': String(quota.limit),
    'ratelimit-remaining': String(quota.remaining),
    'ratelimit-reset': String(quota.resetSeconds),
  };
}

/** A problem the router answers itself: `about:blank`, since no service is there to name it (docs/decisions.md §2). */
function ownProblem(status: number, title: string, remedy: string, code = 'invalid_request'): string {
  return JSON.stringify({ type: 'about:blank', title, status, code, remedy });
}

// Connections to upstreams are reused; without this, every proxied request pays a TCP handshake.
// No cap on sockets in use: each live stream (SSE) holds one for as long as it lives.
const keepAlive = new HttpAgent({ keepAlive: true, maxFreeSockets: 256 });

// Hop-by-hop headers (RFC 9110 §7.6.1) are not forwarded.
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

function endToEnd<T>(headers: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !HOP_BY_HOP.has(name)));
}

/**
 * The router is the public edge of the system: it alone decides the client address. It replaces
 * any X-Forwarded-* a client sent, so nothing behind it can be fooled about who is calling.
 */
function stampForwarding(req: IncomingMessage): void {
  req.headers['x-forwarded-for'] = req.socket.remoteAddress ?? '';
  req.headers['x-forwarded-proto'] = 'http';
  if (req.headers.host !== undefined) req.headers['x-forwarded-host'] = req.headers.host;
  req.headers[REQUEST_ID_HEADER] = requestIdFrom(req.headers[REQUEST_ID_HEADER]);
}

function badGateway(req: IncomingMessage, res: ServerResponse, limit: number): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(502, { 'content-type': 'application/problem+json', 'retry-after': '5', ...ownHeaders(limit, requestIdFrom(req.headers[REQUEST_ID_HEADER])) });
  res.end(ownProblem(502, 'The service behind the gateway is unavailable', 'Retry in a few seconds with exponential backoff.', 'internal'));
}

/** The gateway's documents are public: any origin may read them, and their preflight is answered. */
function serveDocument(req: IncomingMessage, res: ServerResponse, document: Document, limit: number): void {
  const headers = { ...ownHeaders(limit, requestIdFrom(req.headers[REQUEST_ID_HEADER])), ...corsHeaders() };
  if (req.method === 'OPTIONS') {
    res.writeHead(204, { ...headers, ...corsPreflightHeaders(), allow: 'GET, HEAD' });
    res.end();
    return;
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { ...headers, allow: 'GET, HEAD', 'content-type': 'application/problem+json' });
    res.end(ownProblem(405, 'Method not allowed', 'Use GET (or HEAD) on this document; every URL is listed in the manifest, /.well-known/ai-agent.json.'));
    return;
  }
  res.writeHead(200, {
    'content-type': document.contentType,
    'content-length': String(document.body.length),
    'cache-control': `public, max-age=${document.maxAge}`,
    'x-content-type-options': 'nosniff',
    ...headers,
    ...document.headers,
  });
  res.end(req.method === 'HEAD' ? undefined : document.body);
}

/** Errors of Node's HTTP parser, by their code: what the raw answer says. */
function parserProblem(error: NodeJS.ErrnoException): { status: number; reason: string; title: string; remedy: string } {
  if (error.code === 'HPE_HEADER_OVERFLOW') {
    return {
      status: 431,
      reason: 'Request Header Fields Too Large',
      title: 'The request headers are too large',
      remedy: 'Send at most 16 KiB of request headers: drop cookies and headers this API does not read, and send the token once, as Authorization: Bearer <token>.',
    };
  }
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return { status: 408, reason: 'Request Timeout', title: 'The request took too long to arrive', remedy: 'Send the whole request at once, then retry.' };
  }
  return {
    status: 400,
    reason: 'Bad Request',
    title: 'The request is not valid HTTP/1.1',
    remedy: 'Send a well-formed HTTP/1.1 request: a request line such as GET /api/v1/posts HTTP/1.1, then headers as Name: value, each line ending in CRLF.',
  };
}

/**
 * Answers what Node's HTTP parser refused (headers too large, a malformed request line) as every
 * other error: a problem document with a request id and RateLimit headers, written raw on the
 * socket, which is then closed. Nothing is answered on a socket that is already answering a request.
 */
function answerClientError(error: NodeJS.ErrnoException, socket: Socket, limit: number, log: Logger): void {
  const answering = (socket as Socket & { _httpMessage?: unknown })._httpMessage;
  if (error.code === 'ECONNRESET' || !socket.writable || answering) {
    socket.destroy();
    return;
  }
  const problem = parserProblem(error);
  const requestId = requestIdFrom(undefined);
  log.info({ requestId, code: error.code, status: problem.status }, 'request refused by the HTTP parser');
  const body = Buffer.from(ownProblem(problem.status, problem.title, problem.remedy));
  const headers: Record<string, string> = {
    'Content-Type': 'application/problem+json',
    'Content-Length': String(body.length),
    ...ownHeaders(limit, requestId),
    Connection: 'close',
  };
  const head = `HTTP/1.1 ${problem.status} ${problem.reason}\r\n${Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('')}\r\n`;
  socket.end(Buffer.concat([Buffer.from(head, 'latin1'), body]));
}

/** Proxied event streams open now: they never finish by themselves, so shutdown ends them first. */
const liveStreams = new Set<ServerResponse>();

/** Ends every proxied event stream; their clients reconnect (with Last-Event-ID) to another replica. */
export function endLiveStreams(): void {
  for (const res of liveStreams) res.end();
  liveStreams.clear();
}

/** Builds the request handler that routes by the table. */
export function routeRequests(options: RouterOptions): RequestListener {
  const cursors = new Map<Upstream, number>();
  const limit = options.quotaLimit ?? DEFAULT_QUOTA_LIMIT;
  return (req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const route = matchRoute(options.routes, req.headers.host, path);
    if (route?.upstream === 'gateway') {
      const document = options.documents.get(path);
      if (document) {
        serveDocument(req, res, document, limit);
        return;
      }
    }
    // A gateway path with no document here (an unknown problem slug) gets the catch-all's 404.
    const upstream = route === undefined || route.upstream === 'gateway' ? CATCH_ALL : route.upstream;
    const target = options.targets[upstream];
    stampForwarding(req);
    if (target.kind === 'local') {
      target.handler(req, res);
      return;
    }
    // Round-robin over the replicas of this upstream.
    const index = cursors.get(upstream) ?? 0;
    cursors.set(upstream, index + 1);
    const url = target.urls[index % target.urls.length] as URL;
    const headers = endToEnd(req.headers);
    const proxied = httpRequest(
      { host: url.hostname, port: url.port, method: req.method, path: req.url, headers, agent: keepAlive },
      (upstreamRes) => {
        res.writeHead(upstreamRes.statusCode ?? 502, endToEnd(upstreamRes.headers));
        if (upstreamRes.headers['content-type']?.startsWith('text/event-stream') === true) {
          liveStreams.add(res);
          res.once('close', () => liveStreams.delete(res));
        }
        upstreamRes.pipe(res);
      },
    );
    let clientGone = false;
    proxied.on('error', (error) => {
      // Cancelled because the client went away: nothing failed, nobody to answer.
      if (clientGone) return;
      options.log.warn({ err: error, upstream, url: url.href }, 'upstream failed');
      badGateway(req, res, limit);
    });
    // A client that goes away cancels the upstream request too (long-lived streams included).
    res.on('close', () => {
      if (res.writableFinished) return;
      clientGone = true;
      proxied.destroy();
    });
    req.pipe(proxied);
  };
}

/** Listens on `port` and routes every request by the table. */
export async function startRouter(options: RouterOptions & { port: number; host?: string }): Promise<{ server: Server; port: number }> {
  const headersTimeout = options.headersTimeoutMs ?? DEFAULT_HEADERS_TIMEOUT_MS;
  const requestTimeout = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  if (headersTimeout > requestTimeout) throw new Error(`HEADERS_TIMEOUT_MS (${headersTimeout}) must not exceed REQUEST_TIMEOUT_MS (${requestTimeout})`);
  // A slow client (slowloris) gets 408 and its socket closed once its request is late, so it holds
  // no connection for long. Node looks for late requests every connectionsCheckingInterval (30 s by
  // default): checked four times per headers timeout, a late one is closed at most a quarter late.
  const server = createServer(
    { keepAliveTimeout: 65_000, headersTimeout, requestTimeout, connectionsCheckingInterval: Math.min(5_000, Math.max(50, Math.floor(headersTimeout / 4))) },
    routeRequests(options),
  );
  // Without this, Node answers a bare status line with no body or headers of ours.
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => answerClientError(error, socket, options.quotaLimit ?? DEFAULT_QUOTA_LIMIT, options.log));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '0.0.0.0', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  options.log.info({ port }, 'router listening');
  return { server, port };
}
