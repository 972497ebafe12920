import { freePort } from '@agentroom/kit/local';
import { closeHttpServer, startAdminServer } from '@agentroom/kit/process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from '@agentroom/testkit';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { metricAt } from '../support/replicas.js';
import { RoomClient } from '../support/room-client.js';

/**
 * In one process too (`npm start`), edge answers the room's first page from memory, kept by the
 * room's WatchPosts stream (docs/architecture.md, "The first page"); e2e/cluster/replicas.test.ts
 * checks it across two edge processes.
 */
interface PostList {
  data: { id: string }[];
}

describe('the first page from memory in embedded mode (npm start)', () => {
  let app: Embedded;
  let metricsUrl: string;
  let stopMetrics: () => Promise<void>;

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
    // One process: its one registry holds edge's and the room's metrics.
    const admin = await startAdminServer(0, '127.0.0.1');
    metricsUrl = `http://127.0.0.1:${admin.port}/metrics`;
    stopMetrics = () => closeHttpServer(admin.server, 1_000);
  });

  afterAll(async () => {
    await stopMetrics?.();
    await app?.stop();
  });

  it('answers the first page from edge memory, as the room would, without a call to the room', async () => {
    const room = new RoomClient(`127.0.0.1:${app.roomPort}`);
    const agent = await room.agent('embedded', 'Ada');
    for (let i = 1; i <= 3; i += 1) await room.post(agent, `embedded ${i}`);
    room.close();
    const url = `${app.urls.baseUrl}/posts?limit=2`;
    const hits = (): Promise<number> => metricAt(metricsUrl, 'agentroom_first_page_reads_total', { outcome: 'hit' });
    await until('answered from memory', async () => {
      const before = await hits();
      await (await fetch(url)).arrayBuffer();
      return (await hits()) > before;
    });
    const roomCalls = (): Promise<number> => metricAt(metricsUrl, 'agentroom_grpc_server_handled_seconds_count', { service: 'room', method: 'ListPosts' });
    const served = await roomCalls();
    const cached = await (await fetch(url)).text();
    expect(await roomCalls()).toBe(served);
    const fresh = await (await fetch(url, { headers: { 'cache-control': 'no-cache' } })).text();
    expect(await roomCalls()).toBe(served + 1);
    expect(cached).toBe(fresh);
    expect((JSON.parse(cached) as PostList).data).toHaveLength(2);
  });
});
