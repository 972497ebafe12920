// Child process: an OTLP/HTTP receiver of the tracing rows, one per traced cluster (docs/benchmarks.md, docs/decisions.md
// §50). It answers each export as a collector does (200, an empty ExportTraceServiceResponse) and
// keeps no span, so that what the rows measure is what tracing costs the product (making, batching,
// encoding and sending spans), not what a trace store costs the two cores it shares with it.
// GET /stats: the exports received so far and their bytes, so a row can tell its spans did arrive.
import { createServer } from 'node:http';
import { serveOnFreePort } from './children.js';

const stats = { exports: 0, bytes: 0, byAgent: {} as Record<string, number> };

const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/stats') {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(stats));
    return;
  }
  if (req.method !== 'POST' || req.url !== '/v1/traces') {
    req.resume();
    res.writeHead(404).end();
    return;
  }
  let bytes = 0;
  req.on('data', (chunk: Buffer) => (bytes += chunk.length));
  req.on('end', () => {
    stats.exports += 1;
    stats.bytes += bytes;
    // By exporter (Envoy's, the services' SDK), which say who they are in their User-Agent.
    const agent = (req.headers['user-agent'] ?? 'none').split(' ')[0] ?? 'none';
    stats.byAgent[agent] = (stats.byAgent[agent] ?? 0) + 1;
    // An ExportTraceServiceResponse with nothing rejected is an empty message: no bytes.
    res.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': 0 }).end();
  });
});

server.keepAliveTimeout = 30_000;
serveOnFreePort(server);
