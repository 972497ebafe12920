import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRedis, startRedisServer } from '../src/local/index.js';
import { openRedis, REDIS_MAJOR_MIN, redisVersionProblem } from '../src/store/index.js';

/** The Redis version check of openRedis: a server too old for the stores' commands refuses to start, in one line. */
describe('the Redis version a service starts on', () => {
  let server: LocalRedis;
  let info = '';

  beforeAll(async () => {
    server = await startRedisServer();
    const redis = await openRedis(server.url, 'version-test');
    info = await redis.info('server');
    await redis.quit();
  });

  afterAll(async () => {
    await server.stop();
  });

  it('takes the redis-server of this machine, whose INFO names a version at least the minimum', () => {
    const version = /^redis_version:(\S+)/m.exec(info)?.[1] ?? '';
    expect(Number(version.split('.')[0])).toBeGreaterThanOrEqual(REDIS_MAJOR_MIN);
    expect(redisVersionProblem(server.url, info)).toBeUndefined();
  });

  it('refuses the same INFO naming 6.2, in one line with the address, the version, the minimum and the fixes, never the password', () => {
    const older = info.replace(/^redis_version:\S+/m, 'redis_version:6.2.14');
    const problem = redisVersionProblem('redis://:s3cret@10.0.0.7:6380/0', older);
    expect(problem).toBe(
      'Redis at 10.0.0.7:6380 (REDIS_URL=redis://:***@10.0.0.7:6380/0) is version 6.2.14; Agent Room needs Redis 7.0 or newer: upgrade it, point REDIS_URL at a newer one, or unset REDIS_URL for in-memory storage',
    );
  });

  it('lets a server that does not say its version through (a proxy, an ACL that refuses INFO)', () => {
    expect(redisVersionProblem(server.url, '')).toBeUndefined();
    expect(redisVersionProblem(server.url, info.replace(/^redis_version:\S+\r?\n/m, ''))).toBeUndefined();
  });
});
