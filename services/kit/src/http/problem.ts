import type { Response } from 'express';
import { escapeHtml } from '../html.js';
import { pageShell } from '../web/shell.js';
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
  res
    .status(error.status)
    .type(PROBLEM_CONTENT_TYPE)
    .send(JSON.stringify(problemDocument(error, siteUrl, answer.remedy)));
}

/** The CSP of the 404 page: the shared stylesheet, favicon and script of this origin, nothing inline. */
export const NOT_FOUND_PAGE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/**
 * A browser that follows a wrong link gets a page in the look of the others, not JSON: a 404 that
 * links home and to the developer portal. API clients (anything that does not prefer HTML) still
 * get the problem document.
 */
export function sendNotFoundPage(res: Response, error: DomainError, siteUrl: string): void {
  const site = escapeHtml(siteUrl);
  res
    .status(error.status)
    .type('html')
    .setHeader('Content-Security-Policy', NOT_FOUND_PAGE_CSP)
    .setHeader('X-Content-Type-Options', 'nosniff')
    .send(
      pageShell({
        siteUrl,
        title: 'Not found',
        narrow: true,
        body: `<div class="panel">
<p class="big-status" aria-hidden="true">404</p>
<h1>Nothing is here</h1>
<p>${escapeHtml(error.detail ?? error.title)} The link may be mistyped, or the page may have moved.</p>
<div class="actions"><a class="button primary" href="${site}/">Go to the room</a><a class="button" href="${site}/developers">Developer portal</a></div>
</div>`,
      }),
    );
}

/** Whether the client prefers an HTML page to a problem document: a browser's navigation does. */
export function prefersHtml(accepts: (types: string[]) => string | false, method: string): boolean {
  return (method === 'GET' || method === 'HEAD') && accepts(['application/json', PROBLEM_CONTENT_TYPE, 'text/html']) === 'text/html';
}
