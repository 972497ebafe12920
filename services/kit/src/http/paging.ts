import { z } from 'zod';
import { DomainError } from '../problems.js';

export const LIMIT_MIN = 1;
export const LIMIT_MAX = 50;
export const LIMIT_DEFAULT = 20;

const limitSchema = z
  .string()
  .regex(/^\d{1,3}$/)
  .transform(Number)
  .pipe(z.number().int().min(LIMIT_MIN).max(LIMIT_MAX))
  .optional();

// Cursors are ours: base64url, bounded. Their content is checked by the service that issued them.
const cursorSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,256}$/)
  .optional();

export interface Paging {
  limit: number;
  cursor: string | undefined;
}

/** Reads `limit` (and `cursor` when the list is paged) from a query, or throws a 400 with a remedy. */
export function parsePaging(query: Record<string, unknown>, options: { cursor: boolean } = { cursor: true }): Paging {
  const limit = limitSchema.safeParse(query.limit);
  if (!limit.success) {
    throw new DomainError('invalid-request', {
      detail: `limit ${JSON.stringify(query.limit)} is not a whole number from ${LIMIT_MIN} to ${LIMIT_MAX}.`,
      remedy: `Pass limit as a whole number from ${LIMIT_MIN} to ${LIMIT_MAX}, or leave it out for ${LIMIT_DEFAULT}.`,
      extensions: { parameter: 'limit' },
    });
  }
  if (!options.cursor) return { limit: limit.data ?? LIMIT_DEFAULT, cursor: undefined };
  const cursor = cursorSchema.safeParse(query.cursor);
  if (!cursor.success) throw invalidCursor();
  return { limit: limit.data ?? LIMIT_DEFAULT, cursor: cursor.data };
}

export function invalidCursor(): DomainError {
  return new DomainError('invalid-cursor', {
    detail: 'The cursor is not one this list issued.',
    remedy: 'Pass the next_cursor of the previous page unchanged, or leave cursor out to start from the newest item.',
    extensions: { parameter: 'cursor' },
  });
}

/** Opaque cursors: base64url of a versioned position, so their format can change without breaking clients. */
export function encodeCursor(position: string): string {
  return Buffer.from(`v1:${position}`, 'utf8').toString('base64url');
}

/** The position inside a cursor, if it is one of ours and the position has the expected shape. */
export function decodeCursor(cursor: string, position: RegExp): string {
  const text = /^[A-Za-z0-9_-]+$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
  const value = text.startsWith('v1:') ? text.slice(3) : '';
  if (!position.test(value)) throw invalidCursor();
  return value;
}

/**
 * The `limit` of a gRPC list request: 0 means the default; anything else must be in range (edge
 * already checked what users send), or it is an invalid-request problem.
 */
export function grpcLimit(limit: number): number {
  if (limit === 0) return LIMIT_DEFAULT;
  if (!Number.isInteger(limit) || limit < LIMIT_MIN || limit > LIMIT_MAX) {
    throw new DomainError('invalid-request', {
      detail: `limit ${limit} is out of range.`,
      remedy: `Pass limit from ${LIMIT_MIN} to ${LIMIT_MAX}, or 0 for ${LIMIT_DEFAULT}.`,
      extensions: { parameter: 'limit' },
    });
  }
  return limit;
}
