import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { freePort } from '@agentroom/kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RoomClient } from './support/room-client.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

interface Ready {
  site: string;
  room: string;
  edges: string[];
  router: string;
  redis: string;
}

/**
 * Runs what `npm run cluster` runs once it has built (`node gateway/dist/cluster.js`; `npm test`
 * builds first), as separate processes, and reads its ready line.
 */
describe('npm run cluster', () => {
  let cluster: ChildProcess;
  let ready: Ready;
  const lines: string[] = [];

  beforeAll(async () => {
    const port = await freePort();
    cluster = spawn(process.execPath, ['gateway/dist/cluster.js'], {
      cwd: root,
      env: { ...process.env, PORT: String(port), EDGE_REPLICAS: '2', REDIS_URL: '', LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    ready = await new Promise<Ready>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`cluster not ready in time:\n${lines.join('\n')}`)), 60_000);
      let buffer = '';
      cluster.stdout?.on('data', (chunk: Buffer) => {
        buffer += chunk.toString('utf8');
        let newline = buffer.indexOf('\n');
        while (newline >= 0) {
          const line = buffer.slice(0, newline);
          buffer = buffer.slice(newline + 1);
          lines.push(line);
          if (line.includes('"cluster ready')) {
            clearTimeout(timer);
            resolve(JSON.parse(line) as Ready);
          }
          newline = buffer.indexOf('\n');
        }
      });
      cluster.stderr?.on('data', (chunk: Buffer) => lines.push(chunk.toString('utf8')));
      cluster.once('exit', (code) => reject(new Error(`cluster exited with ${code}:\n${lines.join('\n')}`)));
    });
  }, 90_000);

  afterAll(async () => {
    if (cluster.exitCode === null) {
      cluster.kill('SIGTERM');
      await new Promise((resolve) => cluster.once('exit', resolve));
    }
  });

  it('starts Redis, the room, two edges and the router as separate processes', () => {
    expect(ready.redis).toMatch(/^redis:\/\/127\.0\.0\.1:\d+$/);
    expect(ready.edges).toHaveLength(2);
    expect(lines.join('\n')).toContain('REDIS_URL is not set: started a local redis-server');
  });

  it('shows a post created through the room gRPC API on the router REST, from every edge', async () => {
    const room = new RoomClient(ready.room);
    const agent = await room.agent('cluster-agent', 'Margaret');
    const made = await room.post(agent, 'across processes');
    room.close();
    // Two calls: round-robin sends one to each edge process.
    for (let i = 0; i < 2; i += 1) {
      const response = await fetch(`${ready.router}/api/v1/posts?limit=5`);
      expect(response.status).toBe(200);
      expect(response.headers.get('ratelimit-limit')).toBe('5000');
      const body = (await response.json()) as { data: { id: string; text: string; humanLabel: string }[] };
      expect(body.data[0]).toMatchObject({ id: made.id, text: 'across processes', humanLabel: 'Margaret' });
    }
  });

  it('counts the quota in Redis, shared by both edges', async () => {
    const first = Number((await fetch(`${ready.router}/api/v1/agents`)).headers.get('ratelimit-remaining'));
    const second = Number((await fetch(`${ready.router}/api/v1/agents`)).headers.get('ratelimit-remaining'));
    expect(second).toBe(first - 1);
  });

  it('reports healthy on Redis', async () => {
    const response = await fetch(`${ready.router}/api/v1/health`);
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ status: 'healthy', storage: 'redis' });
  });

  it('stops every process on SIGTERM and exits 0', async () => {
    cluster.kill('SIGTERM');
    const code = await new Promise<number | null>((resolve) => cluster.once('exit', resolve));
    expect(code).toBe(0);
    await expect(fetch(`${ready.router}/api/v1/health`)).rejects.toThrow();
  });
});
