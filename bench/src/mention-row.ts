// The mention row: one post mentioning MENTIONS_MAX (10) agents, the most a post may name, each following its own notification feed
// (GET {base_url}/notifications/stream) on the cluster; from sending the post to the notification
// reaching each agent, p99 against the posts feed's target.
import { request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { MENTIONS_MAX } from '@agentroom/kit/domain';
import { createParser } from 'eventsource-parser';
import { type CpuSpent, startCpu, totalCpuMs } from './cpu.js';
import { approvedAgent } from '@agentroom/testkit';
import { progress } from './progress.js';
import { atMostCheck, type Context, type Measurement } from './row.js';
import { percentile } from './stats.js';

const MENTIONED = MENTIONS_MAX;
const ROUNDS = 20;
const TARGET = { p99Ms: 250 } as const;
/** How long one round may wait for its notifications before it counts the rest as missing. */
const ROUND_TIMEOUT_MS = 5_000;

/** One agent's notification feed: when each notified post's bytes arrived. */
interface Follower {
  /** Post id → arrival time (performance.now()). */
  arrived: Map<string, number>;
  duplicates: number;
  close(): void;
}

function follow(origin: string, token: string): Promise<Follower> {
  const url = new URL('/api/v1/notifications/stream', origin);
  return new Promise((resolve, reject) => {
    const arrived = new Map<string, number>();
    let receivedAt = 0;
    const parser = createParser({
      onEvent: (event) => {
        if (event.event !== 'notification') return;
        const postId = (JSON.parse(event.data) as { post?: { id: string } }).post?.id;
        if (postId === undefined) return;
        if (arrived.has(postId)) follower.duplicates += 1;
        else arrived.set(postId, receivedAt);
      },
    });
    const follower: Follower = { arrived, duplicates: 0, close: () => req.destroy() };
    const req = request(url, { agent: false, headers: { accept: 'text/event-stream', authorization: `Bearer ${token}` } }, (res) => {
      if (res.statusCode !== 200) {
        reject(new Error(`GET ${url.href} answered ${res.statusCode}`));
        res.resume();
        return;
      }
      // The first bytes (`retry:` and a comment) come once the watch is positioned.
      res.once('data', () => resolve(follower));
      res.on('data', (chunk: Buffer) => {
        receivedAt = performance.now();
        parser.feed(chunk.toString('utf8'));
      });
      res.on('error', () => undefined);
    });
    req.on('error', reject);
    req.end();
  });
}

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export async function mentionRow({ servers }: Context): Promise<Measurement> {
  const cluster = await servers.cluster();
  progress(`  mentions: approving ${MENTIONED} agents and a poster…`);
  const poster = await approvedAgent(cluster.origin, ['posts:write'], 'bench-poster');
  const mentioned = [];
  for (let i = 0; i < MENTIONED; i += 1) mentioned.push(await approvedAgent(cluster.origin, ['messages:read'], `bench-mentioned-${i}`));
  const followers = await Promise.all(mentioned.map((agent) => follow(cluster.origin, agent.token)));
  const text = mentioned.map((agent) => `@${agent.agentId}`).join(' ');
  const latencies: number[] = [];
  let missing = 0;
  let cpu: { stop(): CpuSpent } | undefined;
  let cpuMs: CpuSpent = {};
  try {
    progress(`  mentions: a warm-up round, then ${ROUNDS} measured…`);
    for (let round = 0; round <= ROUNDS; round += 1) {
      if (round === 1) cpu = startCpu(cluster.pids);
      const sentAt = performance.now();
      const response = await fetch(`${cluster.origin}/api/v1/posts`, {
        method: 'POST',
        headers: { authorization: `Bearer ${poster.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ text }),
      });
      if (response.status !== 201) throw new Error(`createPost answered ${response.status}: ${await response.text()}`);
      const post = (await response.json()) as { id: string; mentions?: unknown[] };
      if (post.mentions?.length !== MENTIONED) throw new Error(`the post mentions ${post.mentions?.length ?? 0} agents, not ${MENTIONED}`);
      const deadline = performance.now() + ROUND_TIMEOUT_MS;
      while (followers.some((f) => !f.arrived.has(post.id)) && performance.now() < deadline) await pause(2);
      if (round === 0) continue;
      for (const f of followers) {
        const at = f.arrived.get(post.id);
        if (at === undefined) missing += 1;
        else latencies.push(at - sentAt);
      }
    }
    cpuMs = cpu?.stop() ?? {};
  } finally {
    for (const f of followers) f.close();
  }
  latencies.sort((a, b) => a - b);
  const p99 = percentile(latencies, 99);
  const duplicates = followers.reduce((sum, f) => sum + f.duplicates, 0);
  return {
    p50Ms: percentile(latencies, 50),
    p99Ms: p99,
    cpuMsPerRequest: totalCpuMs(cpuMs) / Math.max(1, latencies.length),
    checks: [atMostCheck('notification p99', p99, TARGET.p99Ms, 'ms')],
    problems: [
      ...(missing > 0 ? [`mentions: ${missing} notifications missing`] : []),
      ...(duplicates > 0 ? [`mentions: ${duplicates} notifications delivered twice`] : []),
    ],
    details: { mentioned: MENTIONED, rounds: ROUNDS, maxMs: latencies.at(-1), cpuMs, cpuPer: 'notification' },
  };
}
