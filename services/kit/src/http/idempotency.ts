import type { RequestHandler, Response } from 'express';
import type { Logger } from '../log.js';
import { hashSecret } from '../tokens.js';
import { DomainError } from '../problems.js';
import type { IdempotencyStore, StoredResponse } from '../store/idempotency.js';

export const IDEMPOTENCY_HEADER = 'idempotency-key';
const KEY = /^[\x20-\x7E]{1,255}$/;
// Headers a replay must carry to mean the same thing; the rest (dates, request ids, quota) are per call.
const REPLAYED_HEADERS = ['content-type', 'location', 'retry-after', 'www-authenticate'];

/** The subject a call was counted against (set by the quota step), so keys are scoped per token or address. */
export function quotaSubjectOf(res: Response): string {
  return typeof res.locals.quotaSubject === 'string' ? res.locals.quotaSubject : 'unknown';
}

/**
 * `Idempotency-Key` on any POST (CONTRACT §6): the first request runs, a repeat replays its status
 * and body with `Idempotent-Replayed: true`, a repeat while it runs is 409, the same key with
 * another body is 422. 5xx answers are not kept, so a retry can succeed.
 */
export function idempotency(store: IdempotencyStore, log: Logger): RequestHandler {
  return async (req, res, next) => {
    const key = req.headers[IDEMPOTENCY_HEADER];
    if (req.method !== 'POST' || key === undefined) return next();
    if (typeof key !== 'string' || !KEY.test(key)) {
      return next(
        new DomainError('idempotency-key-invalid', {
          detail: 'Idempotency-Key must be 1 to 255 printable ASCII characters.',
          remedy: 'Send an Idempotency-Key of 1 to 255 printable ASCII characters, such as a UUID.',
        }),
      );
    }
    const body: unknown = req.body;
    const fingerprint = hashSecret(Buffer.isBuffer(body) ? body.toString('base64') : JSON.stringify(body ?? null));
    const storeKey = `${quotaSubjectOf(res)}:${hashSecret(`${req.method} ${req.baseUrl}${req.path}\n${key}`)}`;
    const begun = await store.begin(storeKey, fingerprint);
    if (begun.outcome === 'mismatch') {
      return next(
        new DomainError('idempotency-mismatch', {
          detail: 'This Idempotency-Key was first used with a different body.',
          remedy: 'Use a new Idempotency-Key for a different request; a key stays bound to its first body for 24 hours.',
        }),
      );
    }
    if (begun.outcome === 'running') {
      return next(
        new DomainError('idempotency-in-flight', {
          detail: 'The first request with this Idempotency-Key has not finished.',
          remedy: 'Retry in a second with the same key and body to receive the stored answer.',
          headers: { 'Retry-After': '1' },
        }),
      );
    }
    if (begun.outcome === 'replay') {
      for (const [name, value] of Object.entries(begun.response.headers)) res.setHeader(name, value);
      res.setHeader('Idempotent-Replayed', 'true');
      res.status(begun.response.status).end(Buffer.from(begun.response.body, 'base64'));
      return;
    }
    captureResponse(res, (response) => {
      const done = response.status >= 500 ? store.abandon(storeKey) : store.complete(storeKey, fingerprint, response);
      done.catch((error: unknown) => log.error({ err: error }, 'idempotency record not saved'));
    });
    return next();
  };
}

/** Collects the bytes written to `res` and hands the whole answer over when it is finished. */
function captureResponse(res: Response, onFinish: (response: StoredResponse) => void): void {
  const chunks: Buffer[] = [];
  const write = res.write.bind(res) as (...args: unknown[]) => boolean;
  const end = res.end.bind(res) as (...args: unknown[]) => Response;
  const keep = (chunk: unknown, encoding: unknown): void => {
    if (chunk === undefined || chunk === null || typeof chunk === 'function') return;
    chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk), typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8'));
  };
  res.write = ((chunk: unknown, ...rest: unknown[]) => {
    keep(chunk, rest[0]);
    return write(chunk, ...rest);
  }) as Response['write'];
  res.end = ((chunk?: unknown, ...rest: unknown[]) => {
    keep(chunk, rest[0]);
    return end(chunk, ...rest);
  }) as Response['end'];
  res.once('finish', () => {
    const headers: Record<string, string> = {};
    for (const name of REPLAYED_HEADERS) {
      const value = res.getHeader(name);
      if (value !== undefined) headers[name] = String(value);
    }
    onFinish({ status: res.statusCode, headers, body: Buffer.concat(chunks).toString('base64') });
  });
}
