import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { beforeAll, describe, expect, it } from 'vitest';
import { until, approvedToken } from '@agentroom/testkit';
import { percentile, type Replicas } from '../../support/replicas.js';

/**
 * Each edge process answers the room's first page from memory, kept by the room's WatchPosts
 * stream (docs/architecture.md, "The first page"). A post made through edge 1 is on edge 1's first
 * page at once, and on edge 2's within the documented bound (p99 of 100 ms), which this suite
 * measures and prints.
 */
const POSTS = 50;
const BOUND_P99_MS = 100;

interface PostList {
  data: { id: string }[];
}

export function firstPageSuite(replicas: () => Replicas): void {
  describe('the first page from each edge memory, across two edge processes', () => {
    let token: string;
    const firstPage = async (edge: string, init: RequestInit = {}): Promise<string[]> => {
      const response = await fetch(`${edge}/api/v1/posts?limit=5`, init);
      expect(response.status).toBe(200);
      return ((await response.json()) as PostList).data.map((post) => post.id);
    };
    const reads = (edge: 'edge-1' | 'edge-2', outcome: string): Promise<number> => replicas().metric(edge, 'agentroom_first_page_reads_total', { outcome });
    const roomListPosts = (): Promise<number> => replicas().metric('room', 'agentroom_grpc_server_handled_seconds_count', { method: 'ListPosts', code: 'OK' });

    /** Until an edge answers its first page from memory (its first read starts its stream). */
    const warm = (edge: string, name: 'edge-1' | 'edge-2'): Promise<number> =>
      until(`${name} answering from memory`, async () => {
        const before = await reads(name, 'hit');
        await firstPage(edge);
        return (await reads(name, 'hit')) > before;
      });

    beforeAll(async () => {
      const { cluster, edge1, edge2 } = replicas();
      token = await approvedToken(cluster.origin, ['posts:write'], 'first-page');
      await warm(edge1, 'edge-1');
      await warm(edge2, 'edge-2');
    }, 30_000);

    it(`lists a post at once on the edge that took it, and on the other within ${BOUND_P99_MS} ms (p99)`, async () => {
      const { edge1, edge2 } = replicas();
      const [hits, misses] = [await reads('edge-2', 'hit'), await reads('edge-2', 'miss')];
      const delays: number[] = [];
      let polls = 0;
      for (let i = 1; i <= POSTS; i += 1) {
        const created = await fetch(`${edge1}/api/v1/posts`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': randomUUID() },
          body: JSON.stringify({ text: `across edges ${i}` }),
        });
        expect(created.status).toBe(201);
        const { id } = (await created.json()) as { id: string };
        const acknowledged = performance.now();
        // At the same moment: the edge that took it answers it on its next first page, and the other
        // edge is read back to back until its stream has brought it.
        const [own] = await Promise.all([
          firstPage(edge1),
          (async () => {
            for (;;) {
              polls += 1;
              if ((await firstPage(edge2)).includes(id)) break;
              if (performance.now() - acknowledged > 5_000) throw new Error(`post ${id} not on edge 2's first page within 5 s`);
            }
            delays.push(performance.now() - acknowledged);
          })(),
        ]);
        expect(own[0]).toBe(id);
      }
      const sorted = [...delays].sort((a, b) => a - b);
      const [p50, p99, max] = [percentile(sorted, 50), percentile(sorted, 99), sorted.at(-1) ?? Number.NaN];
      console.log(
        `first page across edges: ${POSTS} posts through edge 1, edge 2 polled back to back (${polls} reads): ` +
          `delay after the 201 p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${max.toFixed(1)} ms (bound: p99 <= ${BOUND_P99_MS} ms)`,
      );
      expect(p99).toBeLessThanOrEqual(BOUND_P99_MS);
      // Every read of edge 2 came from its memory: the delay measured is the stream's, not a read of the room.
      expect([(await reads('edge-2', 'hit')) - hits, (await reads('edge-2', 'miss')) - misses]).toEqual([polls, 0]);
    });

    it('reads through to the room with Cache-Control: no-cache, on REST and MCP', async () => {
      const { cluster, edge1, edge2 } = replicas();
      await warm(edge2, 'edge-2');
      const served = await roomListPosts();
      for (let i = 0; i < 10; i += 1) await firstPage(edge2);
      expect(await roomListPosts()).toBe(served);
      for (let i = 0; i < 10; i += 1) await firstPage(edge2, { headers: { 'cache-control': 'no-cache' } });
      expect(await roomListPosts()).toBe(served + 10);

      // MCP's room_read_posts is the same operation: the header of its POST decides the same way.
      const readPosts = async (headers: Record<string, string>): Promise<void> => {
        const response = await fetch(`${cluster.origin}/api/mcp`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18', ...headers },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'room_read_posts', arguments: { limit: 5 } } }),
        });
        expect(response.status).toBe(200);
        expect(((await response.json()) as { result?: { structuredContent?: { object?: string } } }).result?.structuredContent?.object).toBe('list');
      };
      await readPosts({ 'cache-control': 'no-cache' });
      expect(await roomListPosts()).toBe(served + 11);
      await warm(edge1, 'edge-1');
      const before = await roomListPosts();
      // Through the router, whichever edge answers: both answer from memory.
      await readPosts({});
      await readPosts({});
      expect(await roomListPosts()).toBe(before);
    });
  });
}
