import { HealthChecker, serviceClient } from '@agentroom/kit/grpc';
import { recordProto } from '@agentroom/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// The human's side of sign-up over the pages, shared with the benchmark (which needs real tokens too).
import { approvedToken } from '@agentroom/testkit';
import { type ClusterProcess, startClusterProcess } from '../support/processes.js';
import { RoomClient } from '../support/room-client.js';
import { SseClient } from '../support/sse.js';

interface Ready {
  msg: string;
  site: string;
  room: string;
  messaging: string;
  delivery: string;
  record: string;
  database: string;
  webhooksAllowPrivateTargets: boolean;
  edges: string[];
  router: string;
  redis: string;
  metrics: Record<string, string>;
  pids: Record<string, number>;
}

/**
 * Runs what `npm run cluster` runs once it has built (`node launcher/dist/cluster.js`; `npm test`
 * builds first), as separate processes, and reads its ready line.
 */
describe('npm run cluster', () => {
  let cluster: ClusterProcess<Ready>;
  let ready: Ready;
  let lines: string[] = [];

  beforeAll(async () => {
    // As a developer runs it to receive webhooks on this machine: delivery may POST to loopback.
    // The launcher's environment is read when it is spawned; this worker's is given back at once.
    const before = process.env.WEBHOOKS_ALLOW_PRIVATE_TARGETS;
    process.env.WEBHOOKS_ALLOW_PRIVATE_TARGETS = 'true';
    try {
      cluster = await startClusterProcess<Ready>([], 60_000);
    } finally {
      if (before === undefined) delete process.env.WEBHOOKS_ALLOW_PRIVATE_TARGETS;
      else process.env.WEBHOOKS_ALLOW_PRIVATE_TARGETS = before;
    }
    ready = cluster.ready;
    lines = cluster.lines;
  }, 90_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  it('starts Redis, the room, two edges and the router as separate processes', () => {
    expect(ready.redis).toMatch(/^redis:\/\/127\.0\.0\.1:\d+$/);
    expect(ready.edges).toHaveLength(2);
    expect(lines.join('\n')).toContain('REDIS_URL is not set: started a local redis-server');
    // The launcher gave room and messaging its one cursor secret: neither had to draw its own.
    expect(lines.join('\n')).not.toContain('CURSOR_SECRET is not set');
  });

  it('starts delivery as its own process, after messaging, serving gRPC health and metrics', async () => {
    expect(ready.delivery).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(ready.delivery).not.toBe(ready.messaging);
    for (const name of ['room', 'messaging', 'delivery', 'auth', 'edge-1', 'edge-2', 'router', 'redis-server'])
      expect(ready.pids[name], name).toBeGreaterThan(0);
    expect(new Set(Object.values(ready.pids)).size).toBe(Object.keys(ready.pids).length);
    expect(Object.keys(ready.pids).indexOf('delivery')).toBe(Object.keys(ready.pids).indexOf('messaging') + 1);
    const health = new HealthChecker(ready.delivery);
    try {
      expect(await health.check()).toBe('SERVING');
    } finally {
      health.close();
    }
    const metrics = await fetch(ready.metrics.delivery!);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('process_cpu_seconds_total');
  });

  it('says in its ready line that webhooks may target private addresses when WEBHOOKS_ALLOW_PRIVATE_TARGETS=true', () => {
    expect(ready.msg).toContain('room, record, messaging, delivery, ');
    expect(ready.msg).toContain('WEBHOOKS_ALLOW_PRIVATE_TARGETS=true');
    expect(ready.webhooksAllowPrivateTargets).toBe(true);
  });

  it('starts a local PostgreSQL and the record as its own process, which keeps a post made in the room', async () => {
    expect(ready.database).toMatch(/^postgres:\/\/[^@]+@127\.0\.0\.1:\d+\//);
    expect(lines.join('\n')).toContain('DATABASE_URL is not set: started a local PostgreSQL');
    for (const name of ['record', 'postgres']) expect(ready.pids[name], name).toBeGreaterThan(0);
    const health = new HealthChecker(ready.record);
    const record = serviceClient(recordProto().RecordService, ready.record);
    try {
      expect(await health.check()).toBe('SERVING');
      const room = new RoomClient(ready.room);
      const made = await room.post(await room.agent('archivist', 'Grace'), 'kept for good');
      await expect
        .poll(
          () =>
            record.call('getArchivedPost', { postId: made.id }).then(
              (answer) => answer.post?.text,
              () => undefined,
            ),
          { timeout: 5_000 },
        )
        .toBe('kept for good');
    } finally {
      health.close();
      record.close();
    }
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

  it('delivers a post made through one edge process to live subscribers of the other, and through the router', async () => {
    const [one, two] = ready.edges as [string, string];
    const token = await approvedToken(ready.router, ['posts:write'], 'cluster-streamer');
    const onOne = await SseClient.connect(`${one}/api/v1/posts/stream`);
    const viaRouter = await SseClient.connect(`${ready.router}/api/v1/posts/stream`);
    const made = await fetch(`${two}/api/v1/posts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'from edge two to everyone' }),
    });
    expect(made.status).toBe(201);
    const { id } = (await made.json()) as { id: string };
    for (const client of [onOne, viaRouter]) {
      const [event] = await client.waitForEvents(1, 2_000);
      client.close();
      expect(event).toMatchObject({ id, event: 'post' });
      expect(JSON.parse(event?.data ?? '{}')).toMatchObject({ id, text: 'from edge two to everyone', agentName: 'cluster-streamer' });
    }
  });

  it("pages posts and an inbox with cursors across both edges, and refuses a forged or another list's cursor", async () => {
    const [one, two] = ready.edges as [string, string];
    const token = await approvedToken(ready.router, ['posts:write', 'messages:read', 'messages:write'], 'cluster-pager');
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const agents = (await (await fetch(`${one}/api/v1/agents?limit=50`)).json()) as { data: { id: string; agentName: string }[] };
    const self = agents.data.find((a) => a.agentName === 'cluster-pager')?.id ?? '';
    for (let i = 1; i <= 3; i += 1) {
      expect((await fetch(`${one}/api/v1/posts`, { method: 'POST', headers, body: JSON.stringify({ text: `paged ${i}` }) })).status).toBe(201);
      expect((await fetch(`${one}/api/v1/messages`, { method: 'POST', headers, body: JSON.stringify({ to: self, text: `note ${i}` }) })).status).toBe(201);
    }
    type ListBody = { data: { text: string }[]; next_cursor: string };
    const posts = (await (await fetch(`${one}/api/v1/posts?limit=1`)).json()) as ListBody;
    const inbox = (await (await fetch(`${one}/api/v1/messages?limit=1`, { headers })).json()) as ListBody;
    // Issued through edge one, read through edge two.
    expect(((await (await fetch(`${two}/api/v1/posts?limit=1&cursor=${posts.next_cursor}`)).json()) as ListBody).data[0]?.text).toBe('paged 2');
    expect(((await (await fetch(`${two}/api/v1/messages?limit=1&cursor=${inbox.next_cursor}`, { headers })).json()) as ListBody).data[0]?.text).toBe('note 2');
    for (const url of [
      `${two}/api/v1/posts?cursor=${inbox.next_cursor}`,
      `${two}/api/v1/messages?cursor=${posts.next_cursor}`,
      `${two}/api/v1/posts?cursor=${Buffer.from('v1:1-0').toString('base64url')}`,
    ]) {
      const refused = await fetch(url, { headers });
      expect(refused.status).toBe(400);
      expect(await refused.json()).toMatchObject({ code: 'invalid_request', parameter: 'cursor' });
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
    expect(await cluster.stop()).toBe(0);
    await expect(fetch(`${ready.router}/api/v1/health`)).rejects.toThrow();
  });
});
