import { createHmac, randomBytes } from 'node:crypto';
import { LIMIT_DEFAULT, LIMIT_MAX, LIMIT_MIN } from '../limits.js';
import type { Logger } from '../log.js';
import { DomainError } from '../problems.js';
import { sameSecret } from '../tokens.js';

/** What a valid `limit` is, in words, for the problems that refuse one. */
export const LIMIT_EXPECTED = `a whole number from ${LIMIT_MIN} to ${LIMIT_MAX}, or left out for ${LIMIT_DEFAULT}`;

export function invalidCursor(): DomainError {
  return new DomainError('invalid-cursor', {
    detail: 'The cursor is not one this list issued.',
    fields: { parameter: 'cursor', expected: 'the next_cursor of the previous page, unchanged, or left out to start from the newest item' },
  });
}

/** The fewest bytes of a cursor secret (`CURSOR_SECRET`): 256 bits, the size of the HMAC-SHA256 key. */
export const CURSOR_SECRET_MIN_BYTES = 32;

/** A random cursor secret, for a process or a deployment that was given none (docs/decisions.md §6). */
export function newCursorSecret(): string {
  return randomBytes(CURSOR_SECRET_MIN_BYTES).toString('base64url');
}

/** CURSOR_SECRET when it is set; otherwise a random one for this process, with a warning that says what it costs. */
export function cursorSecretOrRandom(secret: string | undefined, log: Pick<Logger, 'warn'>): string {
  if (secret !== undefined) return secret;
  log.warn(
    'CURSOR_SECRET is not set: cursors are signed with a random secret and stop working when this process restarts (set it, the same in every replica, to keep them)',
  );
  return newCursorSecret();
}

/**
 * The list a cursor pages, which it is bound to: the room's posts, or one agent's inbox (its
 * owner is the agent; a cursor from one inbox does not page another).
 */
export type CursorList = { name: 'posts' } | { name: 'inbox'; owner: string };

const CURSOR_VERSION = 2;
const TAG_BYTES = 16;
const CURSOR_MAX_LENGTH = 256;

/**
 * Signed cursors (docs/decisions.md §6): base64url of a version byte, the position, and the first
 * 16 bytes of HMAC-SHA256(secret, version, list, owner, position). Only a process holding the
 * deployment's secret makes one, and one list's cursor does not verify on another.
 */
export class CursorSigner {
  readonly #secret: Buffer;

  constructor(secret: string) {
    this.#secret = Buffer.from(secret, 'utf8');
    if (this.#secret.length < CURSOR_SECRET_MIN_BYTES) throw new Error(`a cursor secret must be at least ${CURSOR_SECRET_MIN_BYTES} bytes`);
  }

  /** The cursor that resumes `list` after `position`. */
  sign(list: CursorList, position: string): string {
    return Buffer.concat([Buffer.of(CURSOR_VERSION), Buffer.from(position, 'utf8'), this.#tag(list, position)]).toString('base64url');
  }

  /** The position inside a cursor this deployment signed for this list, if it has the expected shape; otherwise invalid-cursor. */
  verify(list: CursorList, cursor: string, position: RegExp): string {
    if (cursor.length > CURSOR_MAX_LENGTH || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw invalidCursor();
    const bytes = Buffer.from(cursor, 'base64url');
    // One spelling per cursor: base64url's spare bits in the last character may not be edited either.
    if (bytes.toString('base64url') !== cursor || bytes.length <= 1 + TAG_BYTES || bytes[0] !== CURSOR_VERSION) throw invalidCursor();
    const value = bytes.subarray(1, bytes.length - TAG_BYTES).toString('utf8');
    const given = bytes.subarray(bytes.length - TAG_BYTES).toString('base64url');
    if (!sameSecret(given, this.#tag(list, value).toString('base64url')) || !position.test(value)) throw invalidCursor();
    return value;
  }

  #tag(list: CursorList, position: string): Buffer {
    // JSON keeps the fields apart: no list, owner or position can run into the next.
    const owner = list.name === 'inbox' ? list.owner : '';
    const message = JSON.stringify(['agentroom cursor', CURSOR_VERSION, list.name, owner, position]);
    return createHmac('sha256', this.#secret).update(message, 'utf8').digest().subarray(0, TAG_BYTES);
  }
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
