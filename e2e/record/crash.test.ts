import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvedToken, Load, type RunningCluster, sleep, startCluster } from '@agentroom/testkit';
import { recordedIds } from '../support/record.js';

const DEADLINE_MS = 5_000;

/**
 * The record under faults in cluster mode (`node launcher/dist/cluster.js`, built by `npm test`,
 * with its own redis-server and PostgreSQL): the record process killed with SIGKILL while posts are
 * being made, restarted by the launcher: every post acknowledged meanwhile is in the record, once.
 */
describe('the record in cluster mode', () => {
  let cluster: RunningCluster;
  let token: string;

  beforeAll(async () => {
    cluster = await startCluster({ EDGE_REPLICAS: '1' });
    token = await approvedToken(cluster.origin, ['posts:write'], 'record-crash');
  }, 90_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  it('kill -9 of the record under load: after its restart every acknowledged post is in the record exactly once', async () => {
    const load = new Load(cluster.origin, [token], { readers: 0, writers: 2, deadlineMs: DEADLINE_MS, pauseMs: 10 });
    load.start();
    await sleep(1_500);
    const before = cluster.restarts('record');
    const pid = cluster.pid('record');
    process.kill(pid, 'SIGKILL');
    const newPid = await cluster.restarted('record', before, 15_000);
    await cluster.ready('record', 20_000);
    // Posts go on being made after the restart too.
    await sleep(1_500);
    await load.stop();

    expect(newPid).not.toBe(pid);
    const acknowledged = [...load.acknowledged.keys()];
    expect(acknowledged.length).toBeGreaterThan(20);
    // The room never noticed: no write failed.
    expect(load.stats(0).errors).toBe(0);
    let ids: string[] = [];
    // The restarted process takes the lease once the dead one's lapses (10 s after its last renewal).
    const deadline = Date.now() + 20_000;
    do {
      ids = await recordedIds(cluster.record);
      if (acknowledged.every((id) => ids.includes(id))) break;
      await sleep(200);
    } while (Date.now() < deadline);
    expect(acknowledged.filter((id) => !ids.includes(id))).toEqual([]);
    // Once each, in the room's order.
    expect(ids.length).toBe(new Set(ids).size);
    expect(ids.filter((id) => load.acknowledged.has(id)).reverse()).toEqual([...acknowledged].sort(byStreamId));
  }, 60_000);
});

function byStreamId(a: string, b: string): number {
  const [aMs = 0, aSeq = 0] = a.split('-').map(Number);
  const [bMs = 0, bSeq = 0] = b.split('-').map(Number);
  return aMs - bMs || aSeq - bSeq;
}
