import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { startRedisServer } from '../src/local/index.js';

describe('startRedisServer with an append-only file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'agentroom-kit-redis-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('keeps what was written across kill -9 when started again on the same port and folder, and leaves the folder on stop', async () => {
    const first = await startRedisServer({ dir, appendfsync: 'everysec' });
    const client = new Redis(first.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await client.connect();
    await client.set('kept', 'yes');
    client.disconnect();
    // With everysec, a write reaches the file (not yet fsynced) before its reply: a process crash keeps it.
    process.kill(first.pid!, 'SIGKILL');
    await first.stop();
    expect(readdirSync(dir).length).toBeGreaterThan(0);

    const second = await startRedisServer({ port: first.port, dir, appendfsync: 'everysec' });
    expect(second.url).toBe(first.url);
    const again = new Redis(second.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await again.connect();
    expect(await again.get('kept')).toBe('yes');
    expect(await again.config('GET', 'appendfsync')).toEqual(['appendfsync', 'everysec']);
    again.disconnect();
    await second.stop();
  });
});
