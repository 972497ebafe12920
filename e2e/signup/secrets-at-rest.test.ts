import { freePort, type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';

/** Every value stored under every key, as text: strings, hashes, lists, sets, sorted sets and streams. */
async function everything(redis: Redis): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      found.push(key);
      const type = await redis.type(key);
      if (type === 'string') found.push((await redis.get(key)) ?? '');
      else if (type === 'hash') found.push(...Object.entries(await redis.hgetall(key)).flat());
      else if (type === 'list') found.push(...(await redis.lrange(key, 0, -1)));
      else if (type === 'set') found.push(...(await redis.smembers(key)));
      else if (type === 'zset') found.push(...(await redis.zrange(key, '0', '-1')));
      else if (type === 'stream') found.push(...(await redis.xrange(key, '-', '+')).flatMap(([id, fields]) => [id, ...fields]));
      else found.push(`<${type}>`);
    }
  } while (cursor !== '0');
  return found;
}

function cookieOf(response: Response, name: string): string {
  const cookie = response.headers.getSetCookie().find((c) => c.startsWith(`${name}=`));
  return decodeURIComponent(cookie?.split(';')[0]?.slice(name.length + 1) ?? '');
}

describe('secrets at rest', () => {
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

  it('keeps no usable token, device code, user code, session id or password in Redis after a whole journey', async () => {
    const site = app.urls.siteUrl;
    const password = 'plum-orchard-7-lantern';
    // A human registers through the real sign-in form: the password crosses the page as a human types it.
    const form = await fetch(`${site}/signin`);
    const csrf = /name="csrf" value="([^"]+)"/.exec(await form.text())?.[1] ?? '';
    const signedIn = await fetch(`${site}/signin`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `ar_form=${encodeURIComponent(cookieOf(form, 'ar_form'))}` },
      body: new URLSearchParams({ csrf, name: 'Grace Hopper', password, action: 'register', next: '/' }).toString(),
    });
    expect(signedIn.status).toBe(303);
    const sessionId = cookieOf(signedIn, 'ar_session');
    expect(sessionId.length).toBeGreaterThan(10);

    // Two agents sign up; the human approves both; they post, message each other, and one is revoked.
    const secrets: Record<string, string> = { password, sessionId };
    const tokens: string[] = [];
    for (const name of ['scout', 'keeper']) {
      const started = (await (
        await fetch(`${app.urls.apiUrl}/agent/signup/start`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ scopes: ['posts:write', 'messages:write', 'messages:read'], agent_name: name }),
        })
      ).json()) as { device_code: string; user_code: string };
      const human = await app.auth.humans.verify('Grace Hopper', password);
      if (!human) throw new Error('the human registered above cannot sign in');
      await app.auth.flows.approve(started.user_code, human);
      const polled = (await (await fetch(`${app.urls.apiUrl}/agent/signup/poll?device_code=${encodeURIComponent(started.device_code)}`)).json()) as {
        access_token: string;
      };
      tokens.push(polled.access_token);
      secrets[`${name} device code`] = started.device_code;
      secrets[`${name} user code`] = started.user_code;
      secrets[`${name} user code without its dash`] = started.user_code.replace('-', '');
      secrets[`${name} token`] = polled.access_token;
    }
    const [scoutToken, keeperToken] = tokens as [string, string];
    const auth = (token: string) => ({ 'content-type': 'application/json', authorization: `Bearer ${token}` });
    expect(
      (await fetch(`${app.urls.baseUrl}/posts`, { method: 'POST', headers: auth(scoutToken), body: JSON.stringify({ text: 'hello, room' }) })).status,
    ).toBe(201);
    const keeper = ((await (await fetch(`${app.urls.baseUrl}/agents`)).json()) as { data: { id: string; agentName: string }[] }).data.find(
      (a) => a.agentName === 'keeper',
    );
    expect(
      (await fetch(`${app.urls.baseUrl}/messages`, { method: 'POST', headers: auth(scoutToken), body: JSON.stringify({ to: keeper?.id, text: 'hi keeper' }) }))
        .status,
    ).toBe(201);
    expect((await fetch(`${app.urls.baseUrl}/messages`, { headers: auth(keeperToken) })).status).toBe(200);
    const revoked = await fetch(`${app.urls.apiUrl}/oauth/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `token=${encodeURIComponent(keeperToken)}`,
    });
    expect(revoked.status).toBe(200);

    const client = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await client.connect();
    try {
      const stored = await everything(client);
      // The journey did write: the scan reads what is there.
      expect(stored.join('\n')).toContain('hello, room');
      for (const [what, secret] of Object.entries(secrets)) {
        expect(
          stored.filter((value) => value.includes(secret)),
          `${what} is stored as it is`,
        ).toEqual([]);
      }
      // The token's random part alone (without its prefix and checksum) is not there either.
      for (const token of tokens) {
        const body = token.slice('agt_'.length, -6);
        expect(
          stored.filter((value) => value.includes(body)),
          'the random part of a token',
        ).toEqual([]);
      }
    } finally {
      client.disconnect();
    }
  });
});
