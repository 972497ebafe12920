import { DomainError } from '../problems.js';

export const LIMIT_MIN = 1;
export const LIMIT_MAX = 50;
export const LIMIT_DEFAULT = 20;

/** What a valid `limit` is, in words, for the problems that refuse one. */
export const LIMIT_EXPECTED = `a whole number from ${LIMIT_MIN} to ${LIMIT_MAX}, or left out for ${LIMIT_DEFAULT}`;

export function invalidCursor(): DomainError {
  return new DomainError('invalid-cursor', {
    detail: 'The cursor is not one this list issued.',
    fields: { parameter: 'cursor', expected: 'the next_cursor of the previous page, unchanged, or left out to start from the newest item' },
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
      fields: { parameter: 'limit', expected: `a whole number from ${LIMIT_MIN} to ${LIMIT_MAX}, or 0 for ${LIMIT_DEFAULT}` },
    });
  }
  return limit;
}
