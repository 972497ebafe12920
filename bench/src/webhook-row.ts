// The webhooks row: 20 agents, each with a webhook endpoint on a receiver of ours (127.0.0.1,
// answering 204), and posts naming all 20 sent to the cluster at a steady rate; every mention is a
// notification, and so one delivery (room → messaging's notifier → its events → delivery's
// dispatcher, queue and workers → a signed POST). Deliveries per second over a measured window after
// a warm-up, and the latency from sending each post to each of its deliveries arriving.
import { Agent, createServer, type IncomingHttpHeaders, request, type Server } from 'node:http';
import { type AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { MENTIONS_MAX } from '@agentroom/kit/domain';
import { Webhook } from 'standardwebhooks';
import { type CpuSpent, startCpu, totalCpuMs } from './cpu.js';
import { approvedAgent, humanSession } from '@agentroom/testkit';
import { progress } from './progress.js';
import { atLeastCheck, atMostCheck, type Context, figure, type Measurement } from './row.js';
import { percentile } from './stats.js';

/** Agents with an endpoint each; every post names them all: the most a post may name. */
const AGENTS = MENTIONS_MAX;
/**
 * Deliveries per second offered: a fifth above the target, so that keeping up shows as meeting it.
 * BENCH_WEBHOOKS_RATE asks for another (a multiple of AGENTS), to look for the ceiling.
 */
const OFFERED_PER_SECOND = Number(process.env.BENCH_WEBHOOKS_RATE ?? 600);
const WARMUP_SECONDS = 5;
const MEASURE_SECONDS = 20;
const TARGET = { deliveriesPerSecond: 500, p99Ms: 1_000 } as const;
/** One delivery in this many is verified as a user's server would (signature and timestamp). */
const VERIFY_EVERY = 10;

/** What the table's notes say of the load. */
export const WEBHOOKS = {
  agents: AGENTS,
  offeredPerSecond: OFFERED_PER_SECOND,
  warmupSeconds: WARMUP_SECONDS,
  measureSeconds: MEASURE_SECONDS,
  verifyEvery: VERIFY_EVERY,
} as const;
/** How long the deliveries of the first post may take before the row gives up (the pipeline does not work). */
const FIRST_POST_TIMEOUT_MS = 15_000;
/** After the last post, how long the deliveries still due may take before they count as missing. */
const DRAIN_TIMEOUT_MS = 15_000;

/** Deliveries as a user's server sees them. */
interface Receiver {
  url: string;
  /** `<post id> <agent index>` → arrival (performance.now()), the first time. */
  arrived: Map<string, number>;
  requests: number;
  duplicates: number;
  verified: number;
  /** Sampled deliveries whose signature did not verify, and requests that were not a delivery of ours. */
  badSignatures: number;
  unexpected: number;
  close(): Promise<void>;
}

function header(headers: IncomingHttpHeaders, name: string): string {
  const value = headers[name];
  return Array.isArray(value) ? (value[0] ?? '') : (value ?? '');
}

/** `signers[i]` verifies the deliveries to agent i's endpoint, at `/hook/<i>`. */
async function startReceiver(signers: Map<number, Webhook>): Promise<Receiver> {
  const seen = new Set<string>();
  const receiver: Receiver = {
    url: '',
    arrived: new Map(),
    requests: 0,
    duplicates: 0,
    verified: 0,
    badSignatures: 0,
    unexpected: 0,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const at = performance.now();
      receiver.requests += 1;
      res.writeHead(204).end();
      const body = Buffer.concat(chunks).toString('utf8');
      const index = Number(/^\/hook\/(\d+)$/.exec(req.url ?? '')?.[1] ?? Number.NaN);
      const signer = signers.get(index);
      const id = header(req.headers, 'webhook-id');
      let postId: string | undefined;
      try {
        postId = (JSON.parse(body) as { data?: { post?: { id?: string } } }).data?.post?.id;
      } catch {
        // counted below
      }
      if (signer === undefined || id === '' || postId === undefined) {
        receiver.unexpected += 1;
        return;
      }
      if (seen.has(id)) {
        receiver.duplicates += 1;
        return;
      }
      seen.add(id);
      receiver.arrived.set(`${postId} ${index}`, at);
      if (receiver.requests % VERIFY_EVERY === 0) {
        try {
          signer.verify(body, {
            'webhook-id': id,
            'webhook-timestamp': header(req.headers, 'webhook-timestamp'),
            'webhook-signature': header(req.headers, 'webhook-signature'),
          });
          receiver.verified += 1;
        } catch {
          receiver.badSignatures += 1;
        }
      }
    });
  });
  // Many short connections (each attempt connects anew): a deep backlog, so none is refused.
  await new Promise<void>((resolve) => server.listen({ port: 0, host: '127.0.0.1', backlog: 4_096 }, () => resolve()));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return receiver;
}

/** createPost over a kept-alive connection; answers the post's id, or undefined when it failed. */
function createPost(origin: URL, agent: Agent, token: string, text: string): Promise<string | undefined> {
  const body = JSON.stringify({ text });
  return new Promise((resolve) => {
    const req = request(
      {
        host: origin.hostname,
        port: origin.port,
        path: '/api/v1/posts',
        method: 'POST',
        agent,
        timeout: 10_000,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          if (res.statusCode !== 201) return resolve(undefined);
          try {
            resolve((JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id?: string }).id);
          } catch {
            resolve(undefined);
          }
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve(undefined));
    req.end(body);
  });
}

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** A sent post: when it was due (open loop: latency counts from then), and its id once answered. */
interface Sent {
  dueAt: number;
  id: Promise<string | undefined>;
}

export async function webhookRow({ servers }: Context): Promise<Measurement> {
  if (!Number.isFinite(OFFERED_PER_SECOND) || OFFERED_PER_SECOND < AGENTS)
    throw new Error(`BENCH_WEBHOOKS_RATE must be a number of deliveries per second of at least ${AGENTS}`);
  const postsPerSecond = OFFERED_PER_SECOND / AGENTS;
  const cluster = await servers.cluster();
  progress(`  webhooks: approving ${AGENTS} agents and a poster, each agent registering an endpoint…`);
  const human = await humanSession(cluster.origin);
  const poster = await approvedAgent(cluster.origin, ['posts:write'], 'bench-webhook-poster', human);
  const agents: { token: string; agentId: string }[] = [];
  for (let i = 0; i < AGENTS; i += 1) agents.push(await approvedAgent(cluster.origin, ['messages:read'], `bench-hooked-${i}`, human));
  const signers = new Map<number, Webhook>();
  const receiver = await startReceiver(signers);
  const keepAlive = new Agent({ keepAlive: true, maxSockets: 32 });
  const origin = new URL(cluster.origin);
  try {
    for (const [i, agent] of agents.entries()) {
      const created = await fetch(`${cluster.origin}/api/v1/webhooks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${agent.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ url: `${receiver.url}/hook/${i}`, events: ['mention'] }),
      });
      if (created.status !== 201) throw new Error(`createWebhook answered ${created.status}: ${await created.text()}`);
      signers.set(i, new Webhook(((await created.json()) as { secret: string }).secret));
    }
    const text = (n: number): string => `${agents.map((agent) => `@${agent.agentId}`).join(' ')} ${n}`;
    const delivered = (postId: string): number => agents.reduce((sum, _, i) => sum + (receiver.arrived.has(`${postId} ${i}`) ? 1 : 0), 0);

    // One post first, alone: the pipeline works end to end, or the row says so at once.
    const first = await createPost(origin, keepAlive, poster.token, text(0));
    if (first === undefined) throw new Error('the first post was not created');
    const firstDeadline = performance.now() + FIRST_POST_TIMEOUT_MS;
    while (delivered(first) < AGENTS && performance.now() < firstDeadline) await pause(5);
    if (delivered(first) < AGENTS)
      throw new Error(`the first post's deliveries did not all arrive: ${delivered(first)} of ${AGENTS} within ${FIRST_POST_TIMEOUT_MS / 1000} s`);

    progress(
      `  webhooks: ${figure(postsPerSecond)} posts/s naming ${AGENTS} agents (${OFFERED_PER_SECOND} deliveries/s offered), ${WARMUP_SECONDS} s warm-up, then ${MEASURE_SECONDS} s measured…`,
    );
    const sent: Sent[] = [];
    let cpu: { stop(): CpuSpent } | undefined;
    let cpuMs: CpuSpent = {};
    const interval = 1_000 / postsPerSecond;
    const start = performance.now();
    const measureFrom = start + WARMUP_SECONDS * 1_000;
    const measureTo = measureFrom + MEASURE_SECONDS * 1_000;
    let due = start;
    let n = 1;
    const cpuTimer = setTimeout(() => (cpu = startCpu(cluster.pids)), measureFrom - performance.now());
    await new Promise<void>((done) => {
      const tick = (): void => {
        // Everything due by now goes out now: a late timer does not lower the rate.
        for (const now = performance.now(); due <= now && due < measureTo; due += interval)
          sent.push({ dueAt: due, id: createPost(origin, keepAlive, poster.token, text(n++)) });
        if (due < measureTo) setTimeout(tick, Math.max(0, due - performance.now()));
        else done();
      };
      tick();
    });
    clearTimeout(cpuTimer);
    // The window closes when its last post is due, not when the last post is answered.
    await pause(Math.max(0, measureTo - performance.now()));
    cpuMs = cpu?.stop() ?? {};
    const inWindow = [...receiver.arrived.values()].filter((at) => at >= measureFrom && at < measureTo).length;
    const ids = await Promise.all(sent.map((post) => post.id));
    const failedPosts = ids.filter((id) => id === undefined).length;
    const expected = ids.filter((id): id is string => id !== undefined);
    progress(`  webhooks: waiting for the deliveries still due…`);
    const drainDeadline = performance.now() + DRAIN_TIMEOUT_MS;
    const drainFrom = performance.now();
    while (expected.some((id) => delivered(id) < AGENTS) && performance.now() < drainDeadline) await pause(20);
    const drainMs = performance.now() - drainFrom;

    const latencies: number[] = [];
    let missing = 0;
    for (const [k, post] of sent.entries()) {
      const id = ids[k];
      if (id === undefined) continue;
      for (let i = 0; i < AGENTS; i += 1) {
        const at = receiver.arrived.get(`${id} ${i}`);
        if (at === undefined) missing += 1;
        else if (post.dueAt >= measureFrom) latencies.push(at - post.dueAt);
      }
    }
    latencies.sort((a, b) => a - b);
    const perSecond = inWindow / MEASURE_SECONDS;
    const p99 = percentile(latencies, 99);
    return {
      p50Ms: percentile(latencies, 50),
      p99Ms: p99,
      cpuMsPerRequest: totalCpuMs(cpuMs) / Math.max(1, inWindow),
      checks: [
        atLeastCheck('deliveries', perSecond, TARGET.deliveriesPerSecond, '/s', ` of ${OFFERED_PER_SECOND} offered`),
        atMostCheck('delivery p99', p99, TARGET.p99Ms, 'ms'),
      ],
      problems: [
        ...(missing > 0 ? [`webhooks: ${missing} deliveries missing ${DRAIN_TIMEOUT_MS / 1000} s after the last post`] : []),
        ...(receiver.duplicates > 0 ? [`webhooks: ${receiver.duplicates} deliveries made twice`] : []),
        ...(failedPosts > 0 ? [`webhooks: ${failedPosts} posts not created`] : []),
        ...(receiver.badSignatures > 0 ? [`webhooks: ${receiver.badSignatures} of the sampled deliveries did not verify`] : []),
        ...(receiver.unexpected > 0 ? [`webhooks: ${receiver.unexpected} requests that were not one of our deliveries`] : []),
      ],
      details: {
        agents: AGENTS,
        offeredPerSecond: OFFERED_PER_SECOND,
        postsPerSecond,
        warmupSeconds: WARMUP_SECONDS,
        measureSeconds: MEASURE_SECONDS,
        posts: sent.length,
        deliveriesInWindow: inWindow,
        deliveriesPerSecond: perSecond,
        latenciesMeasured: latencies.length,
        maxMs: latencies.at(-1),
        drainMs: Math.round(drainMs),
        requests: receiver.requests,
        verified: receiver.verified,
        cpuMs,
        cpuPer: 'delivery',
      },
    };
  } finally {
    keepAlive.destroy();
    await receiver.close();
  }
}
