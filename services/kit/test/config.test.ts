import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError, grpcDeadlineEnv, loadConfig, publicUrls, publicUrlsEnv, storageEnv } from '../src/index.js';

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
    expect(message).toContain('REDIS_URL="localhost:6379": must start with redis:// or rediss://');
    expect(message).toContain('GRPC_DEADLINE_MS="5"');
  });
});
