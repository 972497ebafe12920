import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError, grpcDeadlineEnv, loadConfig, logEnv, publicUrls, publicUrlsEnv, redisClusterNodes, storageEnv, withoutPassword } from '../src/config.js';

describe('configuration from the environment', () => {
  it('derives the public URLs from PORT when nothing else is set', () => {
    const env = loadConfig(publicUrlsEnv, {});
    expect(publicUrls(env)).toEqual({
      siteUrl: 'http://localhost:8080',
      apiUrl: 'http://localhost:8080/api',
      baseUrl: 'http://localhost:8080/api/v1',
    });
  });

  it('honours SITE_URL and API_URL on separate hosts, without trailing slashes', () => {
    const env = loadConfig(publicUrlsEnv, { SITE_URL: 'https://room.example/', API_URL: 'https://api.room.example' });
    expect(publicUrls(env)).toEqual({
      siteUrl: 'https://room.example',
      apiUrl: 'https://api.room.example',
      baseUrl: 'https://api.room.example/v1',
    });
  });

  it('fails fast with one readable line per bad variable', () => {
    const schema = z.object({ ...publicUrlsEnv.shape, ...storageEnv.shape, ...grpcDeadlineEnv.shape });
    let message = '';
    try {
      loadConfig(schema, { PORT: 'eighty', REDIS_URL: 'localhost:6379', GRPC_DEADLINE_MS: '5' });
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      message = (error as Error).message;
    }
    expect(message).toContain('PORT="eighty"');
    expect(message).toContain('REDIS_URL="localhost:6379": must start with redis://, rediss:// or redis+cluster://');
    expect(message).toContain('GRPC_DEADLINE_MS="5"');
  });

  it('reads LOG_FORMAT as json or pretty, by default pretty only when stdout is a terminal', () => {
    expect(loadConfig(logEnv, { LOG_FORMAT: 'pretty' }).LOG_FORMAT).toBe('pretty');
    expect(loadConfig(logEnv, { LOG_FORMAT: 'json' }).LOG_FORMAT).toBe('json');
    expect(loadConfig(logEnv, {}).LOG_FORMAT).toBe(process.stdout.isTTY === true ? 'pretty' : 'json');
    expect(() => loadConfig(logEnv, { LOG_FORMAT: 'yaml' })).toThrow(/^invalid configuration: LOG_FORMAT="yaml": .*"json"\|"pretty"/);
  });

  it('takes a REDIS_URL ioredis would read as written, and says what a good one looks like', () => {
    for (const good of ['redis://127.0.0.1:6379', 'rediss://user:pa%40ss@redis.example:6380/2', 'redis://localhost']) {
      expect(loadConfig(storageEnv, { REDIS_URL: good }).REDIS_URL).toBe(good);
    }
    expect(loadConfig(storageEnv, { REDIS_URL: '' }).REDIS_URL).toBeUndefined();
    expect(loadConfig(storageEnv, { REDIS_URL: 'redis+cluster://:s%40cret@10.0.0.1:6379,10.0.0.2:6380' }).REDIS_URL).toBe(
      'redis+cluster://:s%40cret@10.0.0.1:6379,10.0.0.2:6380',
    );
    expect(redisClusterNodes('redis+cluster://:s%40cret@10.0.0.1:6379,redis-2:6380')).toEqual({
      nodes: [
        { host: '10.0.0.1', port: 6379 },
        { host: 'redis-2', port: 6380 },
      ],
      password: 's@cret',
    });
    expect(redisClusterNodes('redis://10.0.0.1:6379')).toBeUndefined();
    for (const bad of ['redis+cluster://', 'redis+cluster://10.0.0.1', 'redis+cluster://10.0.0.1:6379,', 'redis+cluster://10.0.0.1:99999']) {
      expect(() => loadConfig(storageEnv, { REDIS_URL: bad })).toThrow(/names a Redis Cluster as redis\+cluster:\/\//);
    }
    for (const bad of ['redis://', 'redis://127.0.0.1:port', 'redis://host:6379/keys', 'http://host:6379']) {
      expect(() => loadConfig(storageEnv, { REDIS_URL: bad })).toThrow(/REDIS_URL=.*use one like redis:\/\/127\.0\.0\.1:6379/);
    }
  });

  it('never prints a password back', () => {
    expect(withoutPassword('redis://:s3cret@host:6379')).toBe('redis://:***@host:6379');
    expect(withoutPassword('redis://user:s3cret@host:notaport')).toBe('redis://user:***@host:notaport');
    expect(withoutPassword('redis://user:a@b@host:x')).toBe('redis://user:***@host:x');
    expect(withoutPassword('redis://host:6379')).toBe('redis://host:6379');
  });
});
