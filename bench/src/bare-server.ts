// Child process: the baseline, a bare node:http server answering every request with fixed bytes.
import { createServer } from 'node:http';
import { announcePort, BARE_ENV, stopOnSignal } from './children.js';

const body = Buffer.from(process.env[BARE_ENV.body] ?? '', 'base64');
const contentType = process.env[BARE_ENV.contentType] ?? 'application/octet-stream';
const status = Number(process.env[BARE_ENV.status] ?? '200');

const server = createServer((req, res) => {
  // Drain any request body so keep-alive connections stay usable, as a real server would.
  req.resume();
  res.writeHead(status, { 'content-type': contentType, 'content-length': body.length });
  res.end(body);
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  announcePort(typeof address === 'object' && address ? address.port : 0);
});
stopOnSignal(
  () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
);
