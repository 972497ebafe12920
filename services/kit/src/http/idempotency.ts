import type { RequestHandler, Response } from 'express';
import { z } from 'zod';
import type { Logger } from '../log.js';
import { hashSecret } from '../tokens.js';
import { DomainError } from '../problems.js';
import type { IdempotencyStore } from '../store/idempotency.js';

export const IDEMPOTENCY_HEADER = 'idempotency-key';
/** What an idempotency key may be (docs/decisions.md §6), whichever protocol carries it. */
export const IDEMPOTENCY_KEY = /^[\x20-\x7E]{1,255}$/;
const KEY_EXPECTED = '1 to 255 printable ASCII characters, such as a UUID';
// Headers a replay must carry to mean the same thing; the rest (dates, request ids, quota) are per call.
const REPLAYED_HEADERS = ['content-type', 'location', 'retry-after', 'www-authenticate'];

/** An HTTP answer kept for replay, byte for byte. */
const storedResponse = z.object({ status: z.number().int(), headers: z.record(z.string(), z.string()), body: z.string() });
type StoredResponse = z.output<typeof storedResponse>;

/** The subject a call was counted against (set by the admission step), so keys are scoped per token or address. */
export function quotaSubjectOf(res: Response): string {
  return typeof res.locals.quotaSubject === 'string' ? res.locals.quotaSubject : 'unknown';
}

/** A key that is not 1 to 255 printable ASCII characters. */
export function idempotencyKeyInvalid(parameter: string): DomainError {
  return new DomainError('idempotency-key-invalid', {
    detail: 'The idempotency key must be 1 to 255 printable ASCII characters.',
    fields: { parameter, expected: KEY_EXPECTED },
  });
}

export function idempotencyMismatch(): DomainError {
  return new DomainError('idempotency-mismatch', { detail: 'This idempotency key was first used with a different input.' });
}

export function idempotencyInFlight(): DomainError {
  return new DomainError('idempotency-in-flight', { detail: 'The first call with this idempotency key has not finished.', fields: { retry_after: 1 } });
}

/**
 * `Idempotency-Key` on any POST of a page surface (auth's), replaying its first HTTP answer: a
 * repeat replays status and body with `Idempotent-Replayed: true`, a repeat while it runs is 409,
 * the same key with another body is 422. 5xx answers are not kept, so a retry can succeed.
 * (Edge's operations keep result objects instead, in its own pipeline.)
 */
export function idempotency(store: IdempotencyStore, log: Logger): RequestHandler {
  return async (req, res, next) => {
    const key = req.headers[IDEMPOTENCY_HEADER];
    if (req.method !== 'POST' || key === undefined) return next();
    if (typeof key !== 'string' || !IDEMPOTENCY_KEY.test(key)) return next(idempotencyKeyInvalid('Idempotency-Key'));
    const body: unknown = req.body;
    const fingerprint = hashSecret(Buffer.isBuffer(body) ? body.toString('base64') : JSON.stringify(body ?? null));
    const storeKey = `${quotaSubjectOf(res)}:${hashSecret(`${req.method} ${req.baseUrl}${req.path}\n${key}`)}`;
    const begun = await store.begin(storeKey, fingerprint);
    if (begun.outcome === 'mismatch') return next(idempotencyMismatch());
    if (begun.outcome === 'running') return next(idempotencyInFlight());
    if (begun.outcome === 'replay') {
      const stored = storedResponse.safeParse(begun.result);
      if (!stored.success) return next(new Error('an idempotency record of another kind sits under this key'));
      for (const [name, value] of Object.entries(stored.data.headers)) res.setHeader(name, value);
      res.setHeader('Idempotent-Replayed', 'true');
      res.status(stored.data.status).end(Buffer.from(stored.data.body, 'base64'));
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
