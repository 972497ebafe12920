import { mintToken } from '@agentroom/kit/domain';
import { freePort, type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';

/** Every command Redis runs while `during` runs, as Redis's MONITOR reports them. */
async function commandsDuring(url: string, during: () => Promise<void>): Promise<string[]> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await client.connect();
  // As client.monitor() does, but when another client's command (auth's revocation reader runs one
  // every second) arrives together with MONITOR's OK, ioredis takes it for a reply nobody asked for
  // and emits "Command queue state error", which would reject client.monitor(). That command comes
  // before `during`, so the error is let go.
  const monitor = client.duplicate({ monitor: true, lazyConnect: false });
  monitor.on('error', () => undefined);
  await new Promise((resolve) => monitor.once('monitoring', resolve));
  const seen: string[] = [];
  monitor.on('monitor', (_time: string, args: string[]) => seen.push(args.join(' ')));
  try {
    await during();
    // MONITOR reports asynchronously: a round trip on another connection lets the last lines arrive.
    await client.ping().catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 100));
  } finally {
    monitor.disconnect();
    client.disconnect();
  }
  return seen;
}

describe('hostile input', () => {
  let redis: LocalRedis;
  let app: Embedded;

  beforeAll(async () => {
    redis = await startRedisServer();
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), REDIS_URL: redis.url, QUOTA_PER_ADDRESS: '100000' });
  });

  afterAll(async () => {
    await app.stop();
    await redis.stop();
  });

  const postWith = (token: string) =>
    fetch(`${app.urls.baseUrl}/posts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: '{"text":"hi"}',
    });

  it('refuses a token that fails its checksum before any store lookup', async () => {
    const real = mintToken();
    // One character changed: the shape holds, the checksum does not.
    const mistyped = `${real.slice(0, 10)}${real[10] === 'a' ? 'b' : 'a'}${real.slice(11)}`;
    let status = 0;
    const mistypedCommands = await commandsDuring(redis.url, async () => {
      const response = await postWith(mistyped);
      status = response.status;
      expect(((await response.json()) as { code: string }).code).toBe('token_invalid');
    });
    expect(status).toBe(401);
    expect(mistypedCommands.filter((command) => /token/.test(command))).toEqual([]);

    // The same watch sees the lookup of a well-formed token that is simply unknown: it can tell.
    const unknownCommands = await commandsDuring(redis.url, async () => {
      expect((await postWith(real)).status).toBe(401);
    });
    expect(unknownCommands.filter((command) => /token/.test(command)).length).toBeGreaterThan(0);
  });

  it('answers deeply nested JSON with a problem and keeps serving', async () => {
    const depth = 30_000;
    const nested = `${'['.repeat(depth)}${']'.repeat(depth)}`;
    for (const body of [nested, `{"text":${nested}}`, `{"text":"x","extra":${nested}}`]) {
      const response = await fetch(`${app.urls.baseUrl}/posts`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      expect(response.status, body.slice(0, 40)).toBeGreaterThanOrEqual(400);
      expect(response.status, body.slice(0, 40)).toBeLessThan(500);
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    }
    expect((await fetch(`${app.urls.baseUrl}/posts`)).status).toBe(200);
  });
});
