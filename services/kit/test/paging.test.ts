import { describe, expect, it } from 'vitest';
import { ConfigError, cursorSecretEnv, loadConfig } from '../src/config.js';
import { fromServiceError, toServiceError } from '../src/grpc/index.js';
import { CursorSigner, grpcLimit, newCursorSecret, PostsCursors } from '../src/http/index.js';
import { DomainError, problemDocument } from '../src/problems.js';
import { STREAM_ID } from '../src/store/index.js';

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

describe('signed cursors', () => {
  const SECRET = 'k'.repeat(32);
  const POSITION = '1732300000000-4';
  const cursors = new CursorSigner(SECRET);
  const posts = { name: 'posts' } as const;
  const inbox = (owner: string) => ({ name: 'inbox', owner }) as const;

  function refused(signer: CursorSigner, list: Parameters<CursorSigner['verify']>[0], cursor: string): DomainError {
    const error = problemOf(() => signer.verify(list, cursor, STREAM_ID));
    expect(error).toMatchObject({ slug: 'invalid-cursor', status: 400, code: 'invalid_request', fields: { parameter: 'cursor' } });
    return error;
  }

  it('round-trip a position on the list that signed it, short, URL-safe and opaque', () => {
    const cursor = cursors.sign(posts, POSITION);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
    expect(cursor).not.toContain(POSITION);
    expect(cursors.verify(posts, cursor, STREAM_ID)).toBe(POSITION);
    expect(cursors.verify(inbox('a_alice'), cursors.sign(inbox('a_alice'), POSITION), STREAM_ID)).toBe(POSITION);
    // Another signer with the same secret (another process of the deployment) accepts it.
    expect(new CursorSigner(SECRET).verify(posts, cursor, STREAM_ID)).toBe(POSITION);
  });

  it('refuse a cursor with any one byte edited', () => {
    const bytes = Buffer.from(cursors.sign(posts, POSITION), 'base64url');
    for (let i = 0; i < bytes.length; i += 1) {
      const copy = Buffer.from(bytes);
      copy[i] = (copy[i] ?? 0) ^ 1;
      refused(cursors, posts, copy.toString('base64url'));
    }
  });

  it('refuse a cursor with one character edited, even where base64url has spare bits', () => {
    const cursor = cursors.sign(posts, POSITION);
    for (let i = 0; i < cursor.length; i += 1) {
      const swapped = cursor[i] === 'A' ? 'B' : cursor[i] === 'B' ? 'C' : 'A';
      refused(cursors, posts, `${cursor.slice(0, i)}${swapped}${cursor.slice(i + 1)}`);
    }
  });

  it("refuse a cursor of another list, or of another agent's inbox", () => {
    refused(cursors, inbox('a_alice'), cursors.sign(posts, POSITION));
    refused(cursors, posts, cursors.sign(inbox('a_alice'), POSITION));
    refused(cursors, inbox('a_bob'), cursors.sign(inbox('a_alice'), POSITION));
  });

  it('refuse a cursor signed with another secret', () => {
    refused(cursors, posts, new CursorSigner('x'.repeat(32)).sign(posts, POSITION));
    refused(cursors, posts, new CursorSigner(newCursorSecret()).sign(posts, POSITION));
  });

  it('refuse a truncated or extended cursor', () => {
    const cursor = cursors.sign(posts, POSITION);
    for (let cut = 1; cut < cursor.length; cut += 1) refused(cursors, posts, cursor.slice(0, cursor.length - cut));
    refused(cursors, posts, `${cursor}A`);
    refused(cursors, posts, `${cursor}AAAA`);
  });

  it.each([Buffer.from(POSITION).toString('base64url'), Buffer.from(`v1:${POSITION}`).toString('base64url'), 'AAAA', '', 'not a cursor!', 'A'.repeat(300)])(
    'refuse %j, which no list issued',
    (cursor) => {
      refused(cursors, posts, cursor);
    },
  );

  it('refuse a signed position of the wrong shape', () => {
    refused(cursors, posts, cursors.sign(posts, 'posts:123'));
  });

  it('need a secret of at least 32 bytes, and draw random ones of that size', () => {
    expect(() => new CursorSigner('k'.repeat(31))).toThrow(/32 bytes/);
    const drawn = newCursorSecret();
    expect(Buffer.byteLength(drawn)).toBeGreaterThanOrEqual(32);
    expect(newCursorSecret()).not.toBe(drawn);
  });

  it('read CURSOR_SECRET as optional, at least 32 bytes, and never print it back', () => {
    expect(loadConfig(cursorSecretEnv, {}).CURSOR_SECRET).toBeUndefined();
    expect(loadConfig(cursorSecretEnv, { CURSOR_SECRET: SECRET }).CURSOR_SECRET).toBe(SECRET);
    const short = 'short-secret';
    expect(() => loadConfig(cursorSecretEnv, { CURSOR_SECRET: short })).toThrow(ConfigError);
    try {
      loadConfig(cursorSecretEnv, { CURSOR_SECRET: short });
    } catch (error) {
      expect((error as Error).message).toContain('CURSOR_SECRET');
      expect((error as Error).message).toContain('at least 32 bytes');
      expect((error as Error).message).not.toContain(short);
    }
  });
});

describe("the posts' cursors, which the room and the record share", () => {
  const SECRET = 'k'.repeat(32);
  const [THREAD, REPLY, OTHER] = ['1732300000000-1', '1732300000005-0', '1732300000009-2'];
  const cursors = new PostsCursors(SECRET);

  it('resume the list after a post and a thread after a reply, in any process that holds the secret, as the posts list signs them', () => {
    const other = new PostsCursors(SECRET);
    expect(other.postOf(cursors.afterPost(REPLY))).toBe(REPLY);
    expect(other.replyOf(cursors.afterReply(THREAD, REPLY), THREAD)).toBe(REPLY);
    // The same cursors as the posts list's own signer makes: older cursors keep working.
    expect(cursors.afterPost(REPLY)).toBe(new CursorSigner(SECRET).sign({ name: 'posts' }, REPLY));
    expect(cursors.verify(cursors.sign(`search x after ${REPLY}`), /^search x after /)).toBe(`search x after ${REPLY}`);
  });

  it("refuse a replies cursor for the list, a list cursor for a thread, another thread's cursor, and another secret's", () => {
    const refusals = [
      () => cursors.postOf(cursors.afterReply(THREAD, REPLY)),
      () => cursors.replyOf(cursors.afterPost(REPLY), THREAD),
      () => cursors.replyOf(cursors.afterReply(THREAD, REPLY), OTHER),
      () => cursors.postOf(new PostsCursors('x'.repeat(32)).afterPost(REPLY)),
      () => cursors.postOf(cursors.sign(`search x after ${REPLY}`)),
    ];
    for (const refusal of refusals) expect(problemOf(refusal)).toMatchObject({ slug: 'invalid-cursor', fields: { parameter: 'cursor' } });
  });
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
