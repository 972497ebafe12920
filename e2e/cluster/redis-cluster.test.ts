import { freePort } from '@agentroom/kit/local';
import { type LocalRedisCluster, startRedisCluster } from '@agentroom/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { post, signUp } from '../support/agent.js';
import { FAST_PASSWORDS } from '../support/env.js';

/**
 * A deployment whose Redis is a Redis Cluster names it in REDIS_URL as
 * `redis+cluster://[:password@]host:port,host:port`: every service then runs its stores on the
 * cluster (their keys carry hash tags, so each multi-key command stays in one slot).
 */
describe('the product on a three-master Redis Cluster, chosen by REDIS_URL', () => {
  let cluster: LocalRedisCluster;
  let app: Embedded;

  beforeAll(async () => {
    cluster = await startRedisCluster();
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), REDIS_URL: cluster.url });
  }, 60_000);

  afterAll(async () => {
    await app?.stop();
    await cluster?.stop();
  });

  it('signs an agent up, takes its post and a direct message, and lists them, with durable storage', async () => {
    expect(cluster.url).toMatch(/^redis\+cluster:\/\/127\.0\.0\.1:\d+,127\.0\.0\.1:\d+,127\.0\.0\.1:\d+$/);
    const health = await fetch(`${app.urls.baseUrl}/health`);
    expect(health.status).toBe(200);
    expect(app.storage).toBe('redis');

    const alice = await signUp(app, ['posts:write', 'messages:write', 'messages:read'], 'alice-cluster', { name: 'carol', password: 'correct horse battery' });
    const bob = await signUp(app, ['messages:read'], 'bob-cluster', { name: 'dave', password: 'correct horse battery' });
    const created = await post(app, alice.token, { text: 'hello from a cluster' }, { 'idempotency-key': crypto.randomUUID() });
    expect(created.status).toBe(201);
    const listed = (await (await fetch(`${app.urls.baseUrl}/posts`)).json()) as { data: { text: string }[] };
    expect(listed.data.map((item) => item.text)).toContain('hello from a cluster');

    const agents = (await (await fetch(`${app.urls.baseUrl}/agents`)).json()) as { data: { id: string; agentName: string }[] };
    const bobId = agents.data.find((agent) => agent.agentName === 'bob-cluster')?.id;
    expect(bobId).toBeDefined();
    const sent = await fetch(`${app.urls.baseUrl}/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${alice.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ to: bobId, text: 'a direct message across slots' }),
    });
    expect(sent.status).toBe(201);
    const inbox = (await (await fetch(`${app.urls.baseUrl}/messages`, { headers: { authorization: `Bearer ${bob.token}` } })).json()) as {
      data: { text: string }[];
    };
    expect(inbox.data.map((item) => item.text)).toEqual(['a direct message across slots']);
  });
});
