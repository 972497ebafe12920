// The MCP change-notification row: an agent's host subscribed to its notifications URI on each
// protocol revision (2026-07-28 `subscriptions/listen` on the SDK's v2 client, 2025-11-25
// `resources/subscribe` on its session stream with SDK 1.32), on the cluster; from sending a post
// that mentions the agent to `notifications/resources/updated` reaching each host, p99 against the
// issue's "within a second" (docs/decisions.md §47).
import { performance } from 'node:perf_hooks';
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { approvedAgent } from '@agentroom/testkit';
import { type CpuSpent, startCpu, totalCpuMs } from './cpu.js';
import { progress } from './progress.js';
import { atMostCheck, type Context, type Measurement } from './row.js';
import { percentile } from './stats.js';

const ROUNDS = 20;
const TARGET = { p99Ms: 1_000 } as const;
/** How long one round may wait for its notifications before it counts the rest as missing. */
const ROUND_TIMEOUT_MS = 5_000;

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** When each host was last told of the URI: reset before each round. */
interface Told {
  modern: number | undefined;
  legacy: number | undefined;
}

export async function mcpChangesRow({ servers }: Context): Promise<Measurement> {
  const cluster = await servers.cluster();
  progress('  mcp changes: approving a listener and a poster…');
  const listener = await approvedAgent(cluster.origin, ['messages:read'], 'bench-mcp-listener');
  const poster = await approvedAgent(cluster.origin, ['posts:write'], 'bench-mcp-poster');
  const uri = `agentroom://agents/${listener.agentId}/notifications`;
  const endpoint = new URL(`${cluster.origin}/api/mcp`);
  const requestInit = { headers: { authorization: `Bearer ${listener.token}` } };
  const told: Told = { modern: undefined, legacy: undefined };

  const modern = new ModernClient({ name: 'bench-modern', version: '0.1.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  modern.setNotificationHandler('notifications/resources/updated', (notification) => {
    if (notification.params.uri === uri) told.modern ??= performance.now();
  });
  const legacy = new Client({ name: 'bench-legacy', version: '0.1.0' });
  legacy.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => {
    if (notification.params.uri === uri) told.legacy ??= performance.now();
  });
  const latencies = { modern: [] as number[], legacy: [] as number[] };
  let missing = 0;
  let cpu: { stop(): CpuSpent } | undefined;
  let cpuMs: CpuSpent = {};
  try {
    await modern.connect(new ModernTransport(endpoint, { requestInit }));
    const subscription = await modern.listen({ resourceSubscriptions: [uri] });
    await legacy.connect(new StreamableHTTPClientTransport(endpoint, { requestInit }));
    await legacy.subscribeResource({ uri });
    progress(`  mcp changes: a warm-up round, then ${ROUNDS} measured…`);
    for (let round = 0; round <= ROUNDS; round += 1) {
      if (round === 1) cpu = startCpu(cluster.pids);
      told.modern = undefined;
      told.legacy = undefined;
      const sentAt = performance.now();
      const response = await fetch(`${cluster.origin}/api/v1/posts`, {
        method: 'POST',
        headers: { authorization: `Bearer ${poster.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ text: `Round ${round}, @${listener.agentId}` }),
      });
      if (response.status !== 201) throw new Error(`createPost answered ${response.status}: ${await response.text()}`);
      await response.arrayBuffer();
      const deadline = performance.now() + ROUND_TIMEOUT_MS;
      while ((told.modern === undefined || told.legacy === undefined) && performance.now() < deadline) await pause(2);
      if (round === 0) continue;
      for (const era of ['modern', 'legacy'] as const) {
        const at = told[era];
        if (at === undefined) missing += 1;
        else latencies[era].push(at - sentAt);
      }
    }
    cpuMs = cpu?.stop() ?? {};
    await subscription.close();
  } finally {
    await modern.close().catch(() => undefined);
    await legacy.close().catch(() => undefined);
  }
  const all = [...latencies.modern, ...latencies.legacy].sort((a, b) => a - b);
  for (const list of Object.values(latencies)) list.sort((a, b) => a - b);
  const p99 = percentile(all, 99);
  return {
    p50Ms: percentile(all, 50),
    p99Ms: p99,
    cpuMsPerRequest: totalCpuMs(cpuMs) / Math.max(1, all.length / 2),
    checks: [atMostCheck('resources/updated p99', p99, TARGET.p99Ms, 'ms')],
    problems: missing > 0 ? [`mcp changes: ${missing} notifications missing`] : [],
    details: {
      rounds: ROUNDS,
      p99MsByRevision: { '2026-07-28': percentile(latencies.modern, 99), '2025-11-25': percentile(latencies.legacy, 99) },
      p50MsByRevision: { '2026-07-28': percentile(latencies.modern, 50), '2025-11-25': percentile(latencies.legacy, 50) },
      maxMs: all.at(-1),
      cpuMs,
      cpuPer: 'mention (both hosts told)',
    },
  };
}
