import { describe, expect, it } from 'vitest';
import { decodeCursor, DomainError, encodeCursor, parsePaging, problemDocument, STREAM_ID } from '../src/index.js';

function problemOf(fn: () => unknown): DomainError {
  try {
    fn();
  } catch (error) {
    if (error instanceof DomainError) return error;
    throw error;
  }
  throw new Error('expected a DomainError');
}

describe('list paging', () => {
  it('defaults limit to 20 and passes a cursor through', () => {
    expect(parsePaging({})).toEqual({ limit: 20, cursor: undefined });
    expect(parsePaging({ limit: '50', cursor: 'abc_-1' })).toEqual({ limit: 50, cursor: 'abc_-1' });
    expect(parsePaging({ limit: '1' }).limit).toBe(1);
  });

  it.each(['0', '51', 'abc', '1.5', '-1', '', '1e1'])('answers 400 with the valid range for limit=%j', (limit) => {
    const error = problemOf(() => parsePaging({ limit }));
    expect(error.status).toBe(400);
    expect(error.code).toBe('invalid_request');
    expect(error.remedy).toMatch(/1 to 50/);
  });

  it('refuses a repeated limit parameter', () => {
    expect(problemOf(() => parsePaging({ limit: ['1', '2'] })).code).toBe('invalid_request');
  });

  it('refuses cursors that are not base64url', () => {
    const error = problemOf(() => parsePaging({ cursor: 'not a cursor!' }));
    expect(error.slug).toBe('invalid-cursor');
    expect(error.status).toBe(400);
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
  it('carry type, title, status, code and remedy, and extensions', () => {
    const error = new DomainError('text-too-long', { remedy: 'Shorten it.', detail: 'Too long.', extensions: { max_length: 500 } });
    expect(problemDocument(error, 'https://room.example')).toEqual({
      type: 'https://room.example/problems/text-too-long',
      title: 'The text is too long',
      status: 400,
      code: 'invalid_request',
      detail: 'Too long.',
      remedy: 'Shorten it.',
      max_length: 500,
    });
  });

  it('map each code to the status of CONTRACT §2', () => {
    expect(new DomainError('payload-too-large', { remedy: 'x' }).status).toBe(413);
    expect(new DomainError('unavailable', { remedy: 'x' }).status).toBe(503);
    expect(new DomainError('rate-limited', { remedy: 'x' }).status).toBe(429);
    expect(new DomainError('not-found', { remedy: 'x' }).status).toBe(404);
  });
});
