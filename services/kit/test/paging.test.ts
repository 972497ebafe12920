import { describe, expect, it } from 'vitest';
import { decodeCursor, DomainError, encodeCursor, fromServiceError, grpcLimit, problemDocument, STREAM_ID, toServiceError } from '../src/index.js';

function problemOf(fn: () => unknown): DomainError {
  try {
    fn();
  } catch (error) {
    if (error instanceof DomainError) return error;
    throw error;
  }
  throw new Error('expected a DomainError');
}

describe('gRPC list limits', () => {
  it('read 0 as the default and pass 1 to 50 through', () => {
    expect(grpcLimit(0)).toBe(20);
    expect(grpcLimit(1)).toBe(1);
    expect(grpcLimit(50)).toBe(50);
  });

  it.each([51, -1, 1.5])('refuse %j as invalid-request naming limit and the valid range', (limit) => {
    const error = problemOf(() => grpcLimit(limit));
    expect(error).toMatchObject({ slug: 'invalid-request', status: 400, fields: { parameter: 'limit' } });
    expect(error.fields.expected).toMatch(/1 to 50/);
  });
});

describe('cursors', () => {
  it('round-trip a position and are opaque base64url', () => {
    const cursor = encodeCursor('1732300000000-4');
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(cursor).not.toContain('1732300000000');
    expect(decodeCursor(cursor, STREAM_ID)).toBe('1732300000000-4');
  });

  it.each([Buffer.from('1732300000000-4').toString('base64url'), encodeCursor('posts:123'), 'AAAA', encodeCursor('')])(
    'rejects %j, which we did not issue',
    (cursor) => {
      expect(problemOf(() => decodeCursor(cursor, STREAM_ID)).slug).toBe('invalid-cursor');
    },
  );
});

describe('problem documents', () => {
  it('carry type, title, status, code, the remedy their surface worded, and the fields', () => {
    const error = new DomainError('text-too-long', { detail: 'Too long.', fields: { parameter: 'text', max_length: 500 } });
    expect(problemDocument(error, 'https://room.example', 'Shorten it.')).toEqual({
      type: 'https://room.example/problems/text-too-long',
      title: 'The text is too long',
      status: 400,
      code: 'invalid_request',
      detail: 'Too long.',
      remedy: 'Shorten it.',
      parameter: 'text',
      max_length: 500,
    });
  });

  it('map each code to the status of docs/decisions.md §2', () => {
    expect(new DomainError('payload-too-large').status).toBe(413);
    expect(new DomainError('unavailable').status).toBe(503);
    expect(new DomainError('rate-limited').status).toBe(429);
    expect(new DomainError('not-found').status).toBe(404);
    expect(new DomainError('scope-required').status).toBe(403);
  });
});

describe('domain errors across gRPC', () => {
  it('travel as slug, detail and fields, and come back the same', () => {
    const sent = new DomainError('scope-required', { detail: 'Needs more.', fields: { required_scope: 'posts:write', held_scopes: ['agents:read'] } });
    const received = fromServiceError(toServiceError(sent));
    expect(received).toMatchObject({ slug: 'scope-required', detail: 'Needs more.', fields: { required_scope: 'posts:write', held_scopes: ['agents:read'] } });
  });

  it('arrive as internal when a peer sends a trailer that does not fit the schema', () => {
    const forged = toServiceError(new DomainError('not-found'));
    forged.metadata.set('agentroom-problem-bin', Buffer.from(JSON.stringify({ slug: 'not-found', fields: { retry_after: 'soon' } })));
    expect(fromServiceError(forged).slug).toBe('internal');
  });
});
