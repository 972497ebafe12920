import { beforeAll, describe, expect, it } from 'vitest';
import { listedPostIds, Load, sleep, approvedToken } from '@agentroom/testkit';
import type { Replicas } from '../../support/replicas.js';

/**
 * A rollout replaces replicas one at a time with SIGTERM. Two edges behind the router, under a
 * steady load of reads and writes (with Idempotency-Keys, as agents send them): each edge in turn
 * is told to stop; it reports not ready, closes its connections after each answer, finishes what
 * it has, and exits; the launcher starts it again. No request fails and no acknowledged post is lost.
 * (The shared cluster gives each edge half a second of "not ready but still serving" before its
 * listener closes, SHUTDOWN_DELAY_MS 500; Kubernetes gives a few seconds.)
 */
export function rolloutSuite(replicas: () => Replicas): void {
  describe('SIGTERM under load', () => {
    let token: string;

    beforeAll(async () => {
      token = await approvedToken(replicas().cluster.origin, ['posts:write'], 'rollout');
    }, 30_000);

    it('each edge in turn leaves and comes back: every request answered, nothing lost', async () => {
      const { cluster } = replicas();
      const load = new Load(cluster.origin, [token], { readers: 2, writers: 2, deadlineMs: 5_000, pauseMs: 5 });
      load.start();
      await sleep(500);
      const from = Date.now();
      for (const edge of ['edge-1', 'edge-2']) {
        const before = cluster.restarts(edge);
        process.kill(cluster.pid(edge), 'SIGTERM');
        await cluster.restarted(edge, before, 15_000);
        // As a rollout does: the next one leaves only once the new process is ready.
        await cluster.ready(edge);
        await sleep(500);
      }
      await load.stop();

      const window = load.stats(from);
      expect(window.requests).toBeGreaterThan(100);
      expect(window.byOutcome).toEqual({});
      expect(cluster.lines.join('\n')).toMatch(/edge-1 exited \(code 0\)/);
      const listed = await listedPostIds(cluster.origin);
      expect([...load.acknowledged.keys()].filter((id) => !listed.has(id))).toEqual([]);
    }, 60_000);
  });
}
