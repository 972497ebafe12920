import type { Scope } from '@agentroom/kit/domain';
import { freePort, type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { connectRedis, type Redis, RedisIdempotencyStore } from '@agentroom/kit/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { a2aSurface } from '../src/a2a/routes.js';
import { mcpSurface } from '../src/mcp/tools.js';
import { type Admission, type Core, type Credentials, type Outcome, RUNNING_TAKEOVER_MS } from '../src/operations/core.js';
import { restSurface } from '../src/rest/surface.js';
import { approveAsHuman, type Backends, coreOver, type CoreUnderTest, startBackends, urls } from './support/services.js';

const rest = restSurface(urls);
const mcp = mcpSurface(urls);
const a2a = a2aSurface(urls);

let backends: Backends;
let tested: CoreUnderTest;
let core: Core;
let addresses = 0;

/** A fresh client address, so each test has a quota bucket of its own. */
function address(): string {
  return `10.0.0.${(addresses += 1)}`;
}

function admit(token?: string, from = address()): Promise<Admission> {
  return core.admit({ ...(token === undefined ? {} : { authorization: `Bearer ${token}` }), address: from });
}

function failed<T>(outcome: Outcome<T>): { slug: string; status: number; document: Record<string, unknown> } {
  if (outcome.ok) throw new Error(`expected a problem, got ${JSON.stringify(outcome.output).slice(0, 200)}`);
  return { slug: outcome.problem.error.slug, status: outcome.problem.status, document: outcome.problem.document };
}

function succeeded<T>(outcome: Outcome<T>): { output: T; replayed: boolean } {
  if (!outcome.ok) throw new Error(`expected success, got ${JSON.stringify(outcome.problem.document)}`);
  return { output: outcome.output, replayed: outcome.replayed };
}

/** An agent signed up through the pipeline itself, approved by a human on auth's own pages. */
async function token(scopes: Scope[], name: string): Promise<string> {
  const started = succeeded(await core.invoke(await admit(), 'startSignup', { scopes, agent_name: name }, { surface: rest })).output;
  await approveAsHuman(backends.authHttp, started.user_code);
  const polled = succeeded(await core.invoke(await admit(), 'pollSignup', { device_code: started.device_code }, { surface: rest })).output;
  if (polled.status !== 'completed') throw new Error('the signup is still pending');
  return polled.access_token;
}

let writer: string;
let reader: string;

beforeAll(async () => {
  backends = await startBackends();
  tested = coreOver(backends, { perToken: 1_000, perAddress: 1_000 });
  core = tested.core;
  writer = await token(['posts:write'], 'writer');
  reader = await token(['agents:read'], 'reader');
}, 60_000);

afterAll(async () => {
  tested.close();
  await backends.stop();
});

describe('admission: authenticate once, count once', () => {
  it('counts an anonymous call per address and a token call per token', async () => {
    const from = address();
    const first = await admit(undefined, from);
    const second = await admit(undefined, from);
    expect(first.subject).toBe(`addr:${from}`);
    expect(second.quota.remaining).toBe(first.quota.remaining - 1);
    const withToken = await admit(writer, from);
    expect(withToken.subject).toMatch(/^tok:tok_/);
    expect(withToken.caller.principal).toMatchObject({ agentName: 'writer', scopes: ['posts:write'] });
  });

  it('refuses a token that fails its checksum without asking auth, and counts the call per address', async () => {
    const admission = await admit(`${writer.slice(0, -1)}${writer.endsWith('A') ? 'B' : 'A'}`);
    expect(admission.tokenRefusal?.slug).toBe('token-invalid');
    expect(admission.subject).toMatch(/^addr:/);
  });
});

describe('the pipeline, step by step', () => {
  it('refuses a bad token before it looks at the scope; an operation that needs none runs as anonymous', async () => {
    const admission = await core.admit({ authorization: 'Bearer nonsense', address: address() });
    expect(failed(await core.invoke(admission, 'createPost', { text: 'x' }, { surface: rest })).slug).toBe('token-invalid');
    // Changed deliberately (docs/decisions.md §4): a bad token does not break reading the room.
    expect(succeeded(await core.invoke(admission, 'listPosts', {}, { surface: rest })).output.object).toBe('list');
  });

  it('checks the scope before the quota, the quota before the input, the input before running', async () => {
    const small = coreOver(backends, { perToken: 1, perAddress: 1 });
    try {
      const spent = async (bearer?: string): Promise<Admission> => {
        const from = address();
        await small.core.admit({ ...(bearer === undefined ? {} : { authorization: `Bearer ${bearer}` }), address: from });
        return small.core.admit({ ...(bearer === undefined ? {} : { authorization: `Bearer ${bearer}` }), address: from });
      };
      // Missing scope and spent quota: the scope answers, since retrying later would not help.
      expect(failed(await small.core.invoke(await spent(reader), 'createPost', { text: 'x' }, { surface: rest })).slug).toBe('scope-required');
      // Spent quota and bad input: the quota answers.
      expect(failed(await small.core.invoke(await spent(writer), 'createPost', { text: 42 }, { surface: rest })).slug).toBe('rate-limited');
      // Within quota, bad input is refused before anything runs.
      const before = (await tested.room.call('listPosts', { limit: 1 })).posts[0]?.id;
      expect(failed(await core.invoke(await admit(writer), 'createPost', { text: 42 }, { surface: rest })).document).toMatchObject({
        code: 'invalid_request',
        parameter: 'text',
      });
      expect((await tested.room.call('listPosts', { limit: 1 })).posts[0]?.id).toBe(before);
    } finally {
      small.close();
    }
  });

  it('asks the scope of the row, or the stricter one a protocol names (listAgents on MCP)', async () => {
    expect(failed(await core.invoke(await admit(), 'createPost', { text: 'x' }, { surface: rest })).document).toMatchObject({
      code: 'no_token',
      required_scope: 'posts:write',
    });
    expect(failed(await core.invoke(await admit(writer), 'getAgent', { agentId: 'a_whoever' }, { surface: rest })).document).toMatchObject({
      code: 'scope_required',
      required_scope: 'agents:read',
      held_scopes: ['posts:write'],
    });
    expect(succeeded(await core.invoke(await admit(), 'listAgents', {}, { surface: rest })).output.object).toBe('list');
    expect(failed(await core.invoke(await admit(), 'listAgents', {}, { surface: mcp })).document).toMatchObject({
      code: 'no_token',
      required_scope: 'agents:read',
    });
    expect(succeeded(await core.invoke(await admit(reader), 'listAgents', {}, { surface: mcp })).output.object).toBe('list');
  });

  it('runs with the caller from the token, and via the protocol that asked', async () => {
    for (const surface of [rest, mcp, a2a]) {
      const { output } = succeeded(
        await core.invoke(await admit(writer), 'createPost', { text: `from ${surface.protocol}`, agentName: 'impostor' }, { surface }),
      );
      expect(output).toMatchObject({ agentName: 'writer', text: `from ${surface.protocol}`, via: surface.protocol });
    }
  });
});

describe('idempotency on result objects', () => {
  it('replays the stored result for the same key and input, on any protocol', async () => {
    const first = succeeded(await core.invoke(await admit(writer), 'createPost', { text: 'kept once' }, { surface: rest, idempotencyKey: 'k-replay' }));
    expect(first.replayed).toBe(false);
    const again = succeeded(await core.invoke(await admit(writer), 'createPost', { text: 'kept once' }, { surface: mcp, idempotencyKey: 'k-replay' }));
    expect(again).toEqual({ output: first.output, replayed: true });
  });

  it('refuses the same key with another input (422), and a malformed key (400)', async () => {
    succeeded(await core.invoke(await admit(writer), 'createPost', { text: 'first input' }, { surface: rest, idempotencyKey: 'k-mismatch' }));
    const other = failed(await core.invoke(await admit(writer), 'createPost', { text: 'second input' }, { surface: rest, idempotencyKey: 'k-mismatch' }));
    expect(other).toMatchObject({ slug: 'idempotency-mismatch', status: 422 });
    expect(failed(await core.invoke(await admit(writer), 'createPost', { text: 'x' }, { surface: mcp, idempotencyKey: 'ключ' })).document).toMatchObject({
      parameter: 'idempotency_key',
    });
  });

  it('lets one of many concurrent calls with one key run; the others wait (409) or replay', async () => {
    const admission = await admit(writer);
    const outcomes = await Promise.all(
      Array.from({ length: 10 }, () => core.invoke(admission, 'createPost', { text: 'raced' }, { surface: rest, idempotencyKey: 'k-race' })),
    );
    const ran = outcomes.filter((o) => o.ok && !o.replayed);
    expect(ran).toHaveLength(1);
    for (const outcome of outcomes) if (!outcome.ok) expect(outcome.problem).toMatchObject({ status: 409, error: { slug: 'idempotency-in-flight' } });
    const posts = (await tested.room.call('listPosts', { limit: 50 })).posts.filter((p) => p.text === 'raced');
    expect(posts).toHaveLength(1);
  });

  it('keeps keys apart per token, and frees the key of a call that failed', async () => {
    const other = await token(['posts:write'], 'other-writer');
    const mine = succeeded(await core.invoke(await admit(writer), 'createPost', { text: 'same key' }, { surface: rest, idempotencyKey: 'k-shared' }));
    const theirs = succeeded(await core.invoke(await admit(other), 'createPost', { text: 'same key' }, { surface: rest, idempotencyKey: 'k-shared' }));
    expect(theirs.replayed).toBe(false);
    expect(theirs.output.id).not.toBe(mine.output.id);
    expect(failed(await core.invoke(await admit(writer), 'createPost', { text: 'x'.repeat(501) }, { surface: rest, idempotencyKey: 'k-retry' })).slug).toBe(
      'text-too-long',
    );
    expect(
      succeeded(await core.invoke(await admit(writer), 'createPost', { text: 'shorter now' }, { surface: rest, idempotencyKey: 'k-retry' })).replayed,
    ).toBe(false);
  });
});

describe('failures become problems worded for the protocol that asked', () => {
  it('names the REST URL, the MCP tool and the A2A method in the same problem', async () => {
    const remedies = await Promise.all(
      [rest, mcp, a2a].map(async (surface) => failed(await core.invoke(await admit(reader), 'sendMessage', { to: 'a_x', text: 'hi' }, { surface })).document),
    );
    for (const document of remedies)
      expect(document).toMatchObject({ type: `${urls.siteUrl}/problems/scope-required`, code: 'scope_required', required_scope: 'messages:write' });
    expect(remedies[0]?.remedy).toContain(`POST ${urls.baseUrl}/messages`);
    expect(remedies[1]?.remedy).toContain('the tool room_send_message');
    expect(remedies[2]?.remedy).toContain(`SendMessage to ${urls.apiUrl}/a2a/<agentId>`);
  });

  it('carries a service problem from gRPC (agent-not-found from messaging) with the fields it sent', async () => {
    const messenger = await token(['messages:write'], 'messenger');
    const problem = failed(await core.invoke(await admit(messenger), 'sendMessage', { to: 'a_nobody0000000000', text: 'anyone?' }, { surface: mcp }));
    expect(problem).toMatchObject({ slug: 'agent-not-found', status: 404, document: { parameter: 'to' } });
    expect(problem.document.remedy).toBe('List the agents with the tool room_list_agents and use one of their ids as the argument "to".');
  });

  it('answers an unreachable service as 503 unavailable, never a stack', async () => {
    const gone = coreOver({ ...backends, room: { ...backends.room, address: '127.0.0.1:9' } }, { perToken: 10, perAddress: 10 });
    try {
      const problem = failed(await gone.core.invoke(await gone.core.admit({ address: address() }), 'listPosts', {}, { surface: rest }));
      expect(problem).toMatchObject({ slug: 'unavailable', status: 503, document: { retry_after: 5 } });
      expect(JSON.stringify(problem.document)).not.toMatch(/at \w+ \(|node_modules|ECONNREFUSED/);
    } finally {
      gone.close();
    }
  });
});

describe('a write counted and claimed in one step (admitAndInvoke), on Redis', () => {
  let redisServer: LocalRedis;
  let redis: Redis;
  let onRedis: CoreUnderTest;

  beforeAll(async () => {
    redisServer = await startRedisServer();
    redis = connectRedis(redisServer.url, 'core-test');
    onRedis = coreOver(backends, { perToken: 1_000, perAddress: 1_000 }, { redisUrl: redisServer.url });
  });

  afterAll(async () => {
    onRedis.close();
    await redis.quit();
    await redisServer.stop();
  });

  const credentials = (bearer?: string, from = address()): Credentials => ({
    ...(bearer === undefined ? {} : { authorization: `Bearer ${bearer}` }),
    address: from,
  });
  const post = (over: Core, text: unknown, key: string | undefined, bearer: string | undefined = writer, from?: string) =>
    over.admitAndInvoke(credentials(bearer, from), 'createPost', { text }, { surface: rest, idempotencyKey: key });

  /** The commands edge sends to Redis while `work` runs, by name (MONITOR; what a script runs inside is left out). */
  async function commandsSentDuring<T>(work: () => Promise<T>): Promise<{ sent: string[]; result: T }> {
    const monitor = await redis.monitor();
    const sent: string[] = [];
    const marker = `end-of-work-${Date.now()}`;
    const ended = new Promise<void>((resolve) => {
      monitor.on('monitor', (_time: string, args: string[], source: string) => {
        const command = (args[0] ?? '').toLowerCase();
        if (command === 'echo' && args[1] === marker) resolve();
        else if (source !== 'lua') sent.push(command);
      });
    });
    try {
      const result = await work();
      await redis.echo(marker);
      await ended;
      return { sent, result };
    } finally {
      monitor.disconnect();
    }
  }

  it('counts the call and claims its key in one script, then keeps the answer: two round trips where admit and invoke take three', async () => {
    await post(onRedis.core, 'warm-up: the server learns the scripts', 'k-warm');
    await onRedis.core.admit(credentials(writer));
    const together = await commandsSentDuring(() => post(onRedis.core, 'one round trip', 'k-one'));
    expect(together.sent).toEqual(['evalsha', 'set']);
    const { admission, outcome } = together.result;
    expect(succeeded(outcome).output).toMatchObject({ text: 'one round trip', agentName: 'writer', via: 'rest' });
    expect(admission.subject).toMatch(/^tok:tok_/);
    expect(admission.quota).toMatchObject({ limit: 1_000, allowed: true });
    const apart = await commandsSentDuring(async () =>
      onRedis.core.invoke(
        await onRedis.core.admit(credentials(writer)),
        'createPost',
        { text: 'three round trips' },
        { surface: mcp, idempotencyKey: 'k-three' },
      ),
    );
    expect(apart.sent).toEqual(['evalsha', 'set', 'set']);
    expect(succeeded(apart.result).replayed).toBe(false);
  });

  it('shares its key space with every protocol: the repeat replays on MCP, another input is 422', async () => {
    const first = succeeded((await post(onRedis.core, 'kept once on Redis', 'k-replay')).outcome);
    const admission = await onRedis.core.admit(credentials(writer));
    const again = succeeded(await onRedis.core.invoke(admission, 'createPost', { text: 'kept once on Redis' }, { surface: mcp, idempotencyKey: 'k-replay' }));
    expect(again).toEqual({ output: first.output, replayed: true });
    expect(succeeded((await post(onRedis.core, 'kept once on Redis', 'k-replay')).outcome)).toEqual({ output: first.output, replayed: true });
    expect(failed((await post(onRedis.core, 'another text', 'k-replay')).outcome)).toMatchObject({ slug: 'idempotency-mismatch', status: 422 });
    expect(failed((await post(onRedis.core, 'x', 'ключ')).outcome).document).toMatchObject({ code: 'invalid_request', parameter: 'Idempotency-Key' });
  });

  it('lets one of many concurrent calls with one key run; the others wait (409)', async () => {
    const outcomes = await Promise.all(Array.from({ length: 10 }, () => post(onRedis.core, 'raced on Redis', 'k-race-redis')));
    expect(outcomes.filter(({ outcome }) => outcome.ok && !outcome.replayed)).toHaveLength(1);
    for (const { outcome } of outcomes) if (!outcome.ok) expect(outcome.problem).toMatchObject({ status: 409, error: { slug: 'idempotency-in-flight' } });
    expect((await onRedis.room.call('listPosts', { limit: 50 })).posts.filter((p) => p.text === 'raced on Redis')).toHaveLength(1);
  });

  it('answers a repeat whose key an edge that died still holds, once that claim is 2.5 s old, with the post it made', async () => {
    const admission = await onRedis.core.admit(credentials(writer));
    const text = 'made by an edge that died';
    const claim = onRedis.core.claimOf(admission.subject, 'createPost', { text }, { surface: rest, idempotencyKey: 'k-dead-edge' });
    if (!claim) throw new Error('createPost with a key claims it');
    // What the other edge did before it died: it claimed the key, and the room made the post.
    expect(await new RedisIdempotencyStore(redis, 'ar').begin(claim.storeKey, claim.fingerprint)).toEqual({ outcome: 'started' });
    const made = await onRedis.room.call('createPost', { agentId: admission.caller.principal?.agentId ?? '', text, via: 'VIA_REST', callKey: claim.callKey });
    // While the first call could still be running, a repeat waits.
    expect(failed((await post(onRedis.core, text, 'k-dead-edge')).outcome).slug).toBe('idempotency-in-flight');
    await new Promise((resolve) => setTimeout(resolve, RUNNING_TAKEOVER_MS));
    // Then it runs, and the room answers the post the first call made rather than make another.
    const taken = succeeded((await post(onRedis.core, text, 'k-dead-edge')).outcome);
    expect(taken).toMatchObject({ replayed: false, output: { id: made.post?.id, text } });
    expect(succeeded((await post(onRedis.core, text, 'k-dead-edge')).outcome)).toEqual({ output: taken.output, replayed: true });
    expect((await onRedis.room.call('listPosts', { limit: 50 })).posts.filter((p) => p.text === text)).toHaveLength(1);
  });

  it('keeps the order of refusals: token, scope, quota, input; counts each call once and claims nothing for them', async () => {
    const small = coreOver(backends, { perToken: 1, perAddress: 1 }, { redisUrl: redisServer.url });
    try {
      const idemKeys = async (): Promise<number> => (await redis.keys('ar:idem:*')).length;
      const keysBefore = await idemKeys();
      expect(failed((await post(small.core, 'x', 'k-1', 'Bearer-less nonsense')).outcome).slug).toBe('token-invalid');
      // A fresh token of its own: its bucket holds one call.
      const spentReader = await token(['agents:read'], 'spent-reader');
      const first = await post(small.core, 'x', 'k-2', spentReader);
      expect(failed(first.outcome).slug).toBe('scope-required');
      expect(first.admission.quota).toMatchObject({ limit: 1, remaining: 0, allowed: true });
      // Missing scope and spent quota: the scope answers.
      expect(failed((await post(small.core, 'x', 'k-3', spentReader)).outcome).slug).toBe('scope-required');
      const spentWriter = await token(['posts:write'], 'spent-writer');
      // Within quota, bad input is refused, and counted.
      const bad = await post(small.core, 42, 'k-4', spentWriter);
      expect(failed(bad.outcome).document).toMatchObject({ code: 'invalid_request', parameter: 'text' });
      expect(bad.admission.quota.remaining).toBe(0);
      // Spent quota and good input: the quota answers, and the key is not claimed.
      const over = await post(small.core, 'good text', 'k-5', spentWriter);
      expect(failed(over.outcome)).toMatchObject({ slug: 'rate-limited', status: 429 });
      expect(over.admission.quota).toMatchObject({ remaining: 0, allowed: false });
      expect(await idemKeys()).toBe(keysBefore);
    } finally {
      small.close();
    }
  });

  it('answers 503 with a full allowance when Redis cannot be reached, and runs nothing', async () => {
    const gone = coreOver(backends, { perToken: 10, perAddress: 10 }, { redisUrl: `redis://127.0.0.1:${await freePort()}` });
    try {
      const before = (await onRedis.room.call('listPosts', { limit: 1 })).posts[0]?.id;
      const { admission, outcome } = await post(gone.core, 'never written', 'k-down');
      expect(failed(outcome)).toMatchObject({ slug: 'unavailable', status: 503 });
      expect(admission.quota).toMatchObject({ limit: 10, remaining: 10 });
      expect((await onRedis.room.call('listPosts', { limit: 1 })).posts[0]?.id).toBe(before);
    } finally {
      gone.close();
    }
  });
});
