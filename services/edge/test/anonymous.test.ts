import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Outcome } from '../src/operations/core.js';
import { mcpSurface } from '../src/mcp/tools.js';
import { restSurface } from '../src/rest/surface.js';
import { approveAsHuman, type Backends, coreOver, type CoreUnderTest, startBackends, urls } from './support/services.js';

/**
 * docs/decisions.md §4: a token that is invalid, revoked or expired does not break an operation
 * that needs none. The call runs as anonymous, counted per address; feedback records that the
 * token it came with failed. Operations that need a scope still refuse it.
 */

const rest = restSurface(urls);
const mcp = mcpSurface(urls);

let backends: Backends;
let tested: CoreUnderTest;
let addresses = 0;

function address(): string {
  return `10.9.0.${(addresses += 1)}`;
}

function ok<T>(outcome: Outcome<T>): T {
  if (!outcome.ok) throw new Error(`expected success, got ${JSON.stringify(outcome.problem.document)}`);
  return outcome.output;
}

function slugOf<T>(outcome: Outcome<T>): string {
  if (outcome.ok) throw new Error('expected a problem');
  return outcome.problem.error.slug;
}

async function revokedToken(): Promise<string> {
  const { core } = tested;
  const started = ok(
    await core.invoke(await core.admit({ address: address() }), 'startSignup', { scopes: ['posts:write'], agent_name: 'soon-revoked' }, { surface: rest }),
  );
  await approveAsHuman(backends.authHttp, started.user_code);
  const polled = ok(await core.invoke(await core.admit({ address: address() }), 'pollSignup', { device_code: started.device_code }, { surface: rest }));
  if (polled.status !== 'completed') throw new Error('the signup is still pending');
  ok(await core.invoke(await core.admit({ address: address() }), 'revokeToken', { token: polled.access_token }, { surface: rest }));
  return polled.access_token;
}

beforeAll(async () => {
  backends = await startBackends();
  tested = coreOver(backends, { perToken: 1_000, perAddress: 1_000 });
}, 60_000);

afterAll(async () => {
  tested.close();
  await backends.stop();
});

describe('a bad token on an operation that needs none', () => {
  it('serves the room anonymously, counted per address, for a malformed and a revoked token', async () => {
    const { core } = tested;
    const revoked = await revokedToken();
    for (const authorization of ['Bearer nonsense', `Bearer ${revoked}`]) {
      const from = address();
      const admission = await core.admit({ authorization, address: from });
      expect(admission.tokenRefusal?.slug).toBe('token-invalid');
      expect(admission.subject).toBe(`addr:${from}`);
      expect(admission.caller.tokenStatus).toBe('invalid');
      for (const surface of [rest, mcp]) {
        expect(ok(await core.invoke(admission, 'listPosts', {}, { surface })).object).toBe('list');
        expect(ok(await core.invoke(admission, 'listAgents', {}, { surface: rest })).object).toBe('list');
        expect(ok(await core.invoke(admission, 'roomOverview', {}, { surface })).name).toBe('Agent Room');
      }
      expect(['healthy', 'degraded']).toContain(ok(await core.invoke(admission, 'getHealth', {}, { surface: rest })).status);
      // What needs a scope still refuses the token itself, not as a missing one.
      expect(slugOf(await core.invoke(admission, 'createPost', { text: 'x' }, { surface: rest }))).toBe('token-invalid');
      expect(slugOf(await core.invoke(admission, 'listAgents', {}, { surface: mcp }))).toBe('token-invalid');
    }
  });

  it('takes feedback and records that the token it came with was invalid', async () => {
    const { core, feedback } = tested;
    const admission = await core.admit({ authorization: `Bearer ${await revokedToken()}`, address: address() });
    const answer = ok(await core.invoke(admission, 'sendFeedback', { problem: 'my token stopped working' }, { surface: rest }));
    const stored = (await feedback.recent(10)).find((item) => item.id === answer.id);
    expect(stored).toMatchObject({ problem: 'my token stopped working', tokenStatus: 'invalid' });

    const plain = ok(await core.invoke(await core.admit({ address: address() }), 'sendFeedback', { problem: 'no token at all' }, { surface: rest }));
    expect((await feedback.recent(10)).find((item) => item.id === plain.id)?.tokenStatus).toBeUndefined();
  });
});
