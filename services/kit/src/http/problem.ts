import type { Response } from 'express';
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
