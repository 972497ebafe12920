import { freePort, type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';

const API_CALLS = 3;
const PAGE_CALLS = 2;

describe.each(['memory', 'redis'] as const)('one per-address quota across the API and the auth pages (%s)', (storage) => {
  let redis: LocalRedis | undefined;
  let app: Embedded;

  beforeAll(async () => {
    redis = storage === 'redis' ? await startRedisServer() : undefined;
    app = await startEmbedded({
      ...FAST_PASSWORDS,
      LOG_LEVEL: 'silent',
      PORT: String(await freePort()),
      QUOTA_PER_ADDRESS: String(API_CALLS + PAGE_CALLS),
      ...(redis ? { REDIS_URL: redis.url, REDIS_KEY_PREFIX: 'shared-quota' } : {}),
    });
    expect(app.storage).toBe(storage);
  });

  afterAll(async () => {
    await app.stop();
    await redis?.stop();
  });

  const api = (): Promise<Response> => fetch(`${app.urls.baseUrl}/posts`);
  const signin = (): Promise<Response> => fetch(`${app.urls.siteUrl}/signin`);

  it(`counts ${API_CALLS} API calls and ${PAGE_CALLS} sign-in pages against one allowance of ${API_CALLS + PAGE_CALLS}, then refuses both`, async () => {
    const remaining: string[] = [];
    for (const call of [api, signin, api, signin, api]) {
      const response = await call();
      expect(response.status).toBe(200);
      remaining.push(response.headers.get('ratelimit-remaining') ?? '');
      await response.arrayBuffer();
    }
    // One counter: each call, whichever surface, takes one from the same allowance.
    expect(remaining).toEqual(['4', '3', '2', '1', '0']);
    for (const call of [api, signin]) {
      const refused = await call();
      expect(refused.status).toBe(429);
      expect(refused.headers.get('ratelimit-remaining')).toBe('0');
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      await refused.arrayBuffer();
    }
  });
});
