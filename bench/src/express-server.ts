// Child process: the second baseline, an empty Express 5 app (its defaults: ETag, X-Powered-By)
// answering every request with fixed bytes: what the framework costs before any product code runs.
import { createServer } from 'node:http';
import express from 'express';
import { cannedResponse } from './canned.js';
import { serveOnFreePort } from './children.js';

const { status, contentType, body } = cannedResponse();

const app = express();
app.use((_req, res) => {
  res.status(status).type(contentType).send(body);
});
serveOnFreePort(createServer(app));
