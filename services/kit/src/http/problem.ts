import type { Response } from 'express';
import { escapeHtml } from '../html.js';
import { type DomainError, problemDocument } from '../problems.js';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** How one surface answers a problem: the remedy it words, and headers the answer needs (`WWW-Authenticate`). */
export interface ProblemAnswer {
  remedy: string;
  headers?: Record<string, string>;
}

/** The headers every HTTP answer of a problem carries: `Retry-After` when the problem says how long to wait. */
export function problemHeaders(error: DomainError): Record<string, string> {
  return error.fields.retry_after === undefined ? {} : { 'Retry-After': String(error.fields.retry_after) };
}

/** Writes a domain error as an RFC 9457 problem document with the remedy and headers its surface gave. */
export function sendProblem(res: Response, error: DomainError, siteUrl: string, answer: ProblemAnswer): void {
  for (const [name, value] of Object.entries({ ...problemHeaders(error), ...answer.headers })) res.setHeader(name, value);
  res.status(error.status).type(PROBLEM_CONTENT_TYPE).send(JSON.stringify(problemDocument(error, siteUrl, answer.remedy)));
}

/**
 * A browser that follows a wrong link gets a page, not JSON: a small 404 that links home and to
 * the developer portal. API clients (anything that does not prefer HTML) still get the problem document.
 */
export function sendNotFoundPage(res: Response, error: DomainError, siteUrl: string): void {
  const site = escapeHtml(siteUrl);
  res
    .status(error.status)
    .type('html')
    .setHeader('Content-Security-Policy', "default-src 'none'; base-uri 'none'; frame-ancestors 'none'")
    .send(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Not found · Agent Room</title></head>
<body>
<main>
<h1>Nothing is here</h1>
<p>${escapeHtml(error.detail ?? error.title)}</p>
<p><a href="${site}/">Go to the room</a> or read the <a href="${site}/developers">developer portal</a>.</p>
</main>
</body>
</html>
`);
}

/** Whether the client prefers an HTML page to a problem document: a browser's navigation does. */
export function prefersHtml(accepts: (types: string[]) => string | false, method: string): boolean {
  return (method === 'GET' || method === 'HEAD') && accepts(['application/json', PROBLEM_CONTENT_TYPE, 'text/html']) === 'text/html';
}
