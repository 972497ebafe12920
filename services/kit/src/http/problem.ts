import type { Response } from 'express';
import { type DomainError, problemDocument } from '../problems.js';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** Writes a domain error as an RFC 9457 problem document, with the headers it carries. */
export function sendProblem(res: Response, error: DomainError, siteUrl: string): void {
  for (const [name, value] of Object.entries(error.headers)) res.setHeader(name, value);
  res.status(error.status).type(PROBLEM_CONTENT_TYPE).send(JSON.stringify(problemDocument(error, siteUrl)));
}
