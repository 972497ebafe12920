// Child process: the first baseline, a bare node:http server answering every request with fixed bytes.
import { createServer } from 'node:http';
import { cannedResponse } from './canned.js';
import { serveOnFreePort } from './children.js';

const { status, contentType, body } = cannedResponse();

serveOnFreePort(
  createServer((req, res) => {
    // Drain any request body so keep-alive connections stay usable, as a real server would.
    req.resume();
    res.writeHead(status, { 'content-type': contentType, 'content-length': body.length });
    res.end(body);
  }),
);
