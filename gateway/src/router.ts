import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse, Agent as HttpAgent, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { REQUEST_ID_HEADER, requestIdFrom, type Logger } from '@agentroom/kit';
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

function badGateway(res: ServerResponse): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(502, { 'content-type': 'application/problem+json', 'retry-after': '5' });
  res.end(
    JSON.stringify({
      type: 'about:blank',
      title: 'The service behind the gateway is unavailable',
      status: 502,
      code: 'internal',
      remedy: 'Retry in a few seconds with exponential backoff.',
    }),
  );
}

function serveDocument(req: IncomingMessage, res: ServerResponse, document: Document): void {
  const requestId = requestIdFrom(req.headers[REQUEST_ID_HEADER]);
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'application/problem+json', 'x-request-id': requestId });
    res.end(JSON.stringify({ type: 'about:blank', title: 'Method not allowed', status: 405, code: 'invalid_request', remedy: 'Use GET.' }));
    return;
  }
  res.writeHead(200, {
    'content-type': document.contentType,
    'content-length': String(document.body.length),
    'cache-control': `public, max-age=${document.maxAge}`,
    'access-control-allow-origin': '*',
    'x-content-type-options': 'nosniff',
    'x-request-id': requestId,
    ...document.headers,
  });
  res.end(req.method === 'HEAD' ? undefined : document.body);
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
  return (req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const route = matchRoute(options.routes, req.headers.host, path);
    if (route?.upstream === 'gateway') {
      const document = options.documents.get(path);
      if (document) {
        serveDocument(req, res, document);
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
      badGateway(res);
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
  const server = createServer({ keepAliveTimeout: 65_000 }, routeRequests(options));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '0.0.0.0', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  options.log.info({ port }, 'router listening');
  return { server, port };
}
