import {
  type ClientRequest,
  createServer,
  type IncomingMessage,
  type RequestListener,
  type Server,
  type ServerResponse,
  Agent as HttpAgent,
  request as httpRequest,
} from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { corsHeaders, corsPreflightHeaders, REQUEST_ID_HEADER, requestIdFrom, sendStatic, uncountedQuota } from '@agentroom/kit/http';
import type { Logger } from '@agentroom/kit/log';
import { CATCH_ALL, matchRoute, type ResolvedRoute, type Upstream } from './routes.js';
import type { ServedDocument } from './discovery.js';

/** An upstream is served in this process (embedded mode) or by replicas over HTTP (cluster mode). */
export type Target = { kind: 'local'; handler: RequestListener } | { kind: 'remote'; urls: URL[] };

export interface RouterOptions {
  routes: readonly ResolvedRoute[];
  targets: Record<Exclude<Upstream, 'gateway'>, Target>;
  /** The gateway's own answers (discovery documents, the portal), by full path. */
  documents: ReadonlyMap<string, ServedDocument>;
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
 * The headers of every answer the router makes itself (documents, 405, 503, parser errors): a
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

/**
 * No replica could take the request: 503 with Retry-After, as when a service behind is unreachable
 * (docs/decisions.md §2). A response already begun can only be cut.
 */
function unavailable(req: IncomingMessage, res: ServerResponse, limit: number): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(503, { 'content-type': 'application/problem+json', 'retry-after': '1', ...ownHeaders(limit, requestIdFrom(req.headers[REQUEST_ID_HEADER])) });
  res.end(
    ownProblem(
      503,
      'The service behind the gateway is unavailable',
      'Retry in a second, then with exponential backoff; a write sent with an Idempotency-Key is safe to repeat.',
      'internal',
    ),
  );
}

/** How long a replica that refused a connection is passed over before it is tried again. */
const EJECT_MS = 1_000;

/** Bodies up to this size are kept while they stream, so a request no replica received can go to another. */
const MAX_REPLAY_BYTES = 1 << 20;

/**
 * The replicas of one upstream, taken in turn. One that refuses a connection (crashed, restarting,
 * or gone after its shutdown) is passed over for EJECT_MS, so the next requests go to the others at
 * once; when every replica is passed over, they are tried anyway (one may be back).
 */
class Replicas {
  private cursor = 0;
  private readonly ejectedUntil = new Map<string, number>();

  constructor(private readonly urls: readonly URL[]) {}

  get size(): number {
    return this.urls.length;
  }

  pick(tried: ReadonlySet<string>): URL | undefined {
    const now = Date.now();
    let fallback: URL | undefined;
    for (let step = 0; step < this.urls.length; step += 1) {
      const url = this.urls[(this.cursor + step) % this.urls.length] as URL;
      if (tried.has(url.href)) continue;
      if ((this.ejectedUntil.get(url.href) ?? 0) <= now) {
        this.cursor = (this.cursor + step + 1) % this.urls.length;
        return url;
      }
      fallback ??= url;
    }
    return fallback;
  }

  eject(url: URL): void {
    this.ejectedUntil.set(url.href, Date.now() + EJECT_MS);
  }
}

/** Methods a replica may safely receive twice; a write is repeated only with an Idempotency-Key. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * The gateway's documents are public: any origin may read them, and their preflight is answered.
 * Each is sent in the coding the client accepts, made once, with its ETag (docs/decisions.md §25).
 */
function serveDocument(req: IncomingMessage, res: ServerResponse, document: ServedDocument, limit: number): void {
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
  sendStatic(req, res, document.asset, {
    always: headers,
    content: { 'content-type': document.contentType, 'x-content-type-options': 'nosniff', ...document.headers },
  });
}

/** Errors of Node's HTTP parser, by their code: what the raw answer says. */
function parserProblem(error: NodeJS.ErrnoException): { status: number; reason: string; title: string; remedy: string } {
  if (error.code === 'HPE_HEADER_OVERFLOW') {
    return {
      status: 431,
      reason: 'Request Header Fields Too Large',
      title: 'The request headers are too large',
      remedy:
        'Send at most 16 KiB of request headers: drop cookies and headers this API does not read, and send the token once, as Authorization: Bearer <token>.',
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
  const limit = options.quotaLimit ?? DEFAULT_QUOTA_LIMIT;
  const pools = new Map<Upstream, Replicas>();
  const replicas = (upstream: Upstream, urls: readonly URL[]): Replicas => {
    let pool = pools.get(upstream);
    if (!pool) pools.set(upstream, (pool = new Replicas(urls)));
    return pool;
  };
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
    proxy(req, res, replicas(upstream, target.urls), upstream);
  };

  /**
   * Sends the request to one replica, and to the next when that one never took it: the connection
   * was refused, or it was reset before any answer and the request is safe to repeat (a read, or a
   * write with an Idempotency-Key). Everything else that fails is a 503.
   */
  function proxy(req: IncomingMessage, res: ServerResponse, pool: Replicas, upstream: Upstream): void {
    const headers = endToEnd(req.headers);
    const repeatable = SAFE_METHODS.has(req.method ?? '') || req.headers['idempotency-key'] !== undefined;
    const tried = new Set<string>();
    const received: Buffer[] = [];
    let receivedBytes = 0;
    let replayable = true;
    let ended = false;
    let clientGone = false;
    let current: ClientRequest | undefined;
    req.on('data', (chunk: Buffer) => {
      if (replayable) {
        received.push(chunk);
        receivedBytes += chunk.length;
        if (receivedBytes > MAX_REPLAY_BYTES) {
          replayable = false;
          received.length = 0;
        }
      }
      // Backpressure: a slow replica slows the client down rather than filling our memory.
      if (current && !current.write(chunk)) {
        req.pause();
        current.once('drain', () => req.resume());
      }
    });
    req.on('end', () => {
      ended = true;
      current?.end();
    });
    // A client that goes away cancels the upstream request too (long-lived streams included).
    res.on('close', () => {
      if (res.writableFinished) return;
      clientGone = true;
      current?.destroy();
    });

    const attempt = (url: URL): void => {
      tried.add(url.href);
      let answered = false;
      const proxied = httpRequest({ host: url.hostname, port: url.port, method: req.method, path: req.url, headers, agent: keepAlive }, (upstreamRes) => {
        answered = true;
        res.writeHead(upstreamRes.statusCode ?? 503, endToEnd(upstreamRes.headers));
        if (upstreamRes.headers['content-type']?.startsWith('text/event-stream') === true) {
          liveStreams.add(res);
          res.once('close', () => liveStreams.delete(res));
        }
        // A replica that dies while it answers (a live stream's, most often) aborts its response, and
        // piping never ends ours: cut it, so the client sees the end and reconnects (EventSource with
        // Last-Event-ID) instead of waiting on a stream nobody writes to any more.
        upstreamRes.once('error', (error) => {
          if (clientGone || res.writableFinished) return;
          options.log.warn({ err: error, upstream, url: url.href }, 'replica went away while answering; cutting the response');
          res.destroy();
        });
        upstreamRes.pipe(res);
      });
      current = proxied;
      for (const chunk of received) proxied.write(chunk);
      if (ended) proxied.end();
      proxied.on('error', (error: NodeJS.ErrnoException) => {
        // Cancelled because the client went away: nothing failed, nobody to answer.
        if (clientGone) return;
        const refused = error.code === 'ECONNREFUSED';
        if (refused) pool.eject(url);
        // Reset before any answer: a kept-alive connection the replica closed as idle, or a new one it
        // dropped unread as it shut down. Sent on only when repeating it is harmless.
        const neverReceived = refused || (error.code === 'ECONNRESET' && !answered && repeatable);
        const next = neverReceived && replayable && !res.headersSent ? pool.pick(tried) : undefined;
        if (next) {
          options.log.info({ upstream, url: url.href, code: error.code, next: next.href }, 'replica did not take the request; sending it to the next');
          attempt(next);
          return;
        }
        options.log.warn({ err: error, upstream, url: url.href }, 'upstream failed');
        unavailable(req, res, limit);
      });
    };
    const first = pool.pick(tried);
    if (first) attempt(first);
    else unavailable(req, res, limit);
  }
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
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) =>
    answerClientError(error, socket, options.quotaLimit ?? DEFAULT_QUOTA_LIMIT, options.log),
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '0.0.0.0', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  options.log.info({ port }, 'router listening');
  return { server, port };
}
