// `npm run chaos -- --redis-cluster` (or `node bench/dist/redis-failover-main.js`): what a Redis
// master's death costs. A Redis Cluster of three masters and three replicas (append-only files,
// cluster-node-timeout 2 s), `npm run cluster` on it, a steady load of readers and writers and the
// live posts feed; then the master holding the room's posts is killed with SIGKILL and its replica
// takes over, the killed node comes back as a replica, and last the replica of the posts' master is
// cut off just before that master is killed too. Prints one row per phase, and exits non-zero
// if a post that was answered 201 is missing afterwards or the room did not recover by itself.
// `REDIS_WAIT_REPLICAS=0` runs it without waiting for replicas (docs/decisions.md §20), to compare.
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { LuaScript, openRedis, Redis, type RedisClient } from '@agentroom/kit/store';
import {
  type LocalRedisCluster,
  startRedisCluster,
  listedPostIds,
  LiveFeed,
  Load,
  type RunningCluster,
  sleep,
  startCluster,
  until,
  type WindowStats,
  approvedToken,
} from '@agentroom/testkit';
import { percentile } from './stats.js';

const NODE_TIMEOUT_MS = 2_000;
const DEADLINE_MS = 5_000;
const MIN_WINDOW_MS = 5_000;
/** How long after its replica is cut off the posts' master is killed: well under REDIS_WAIT_TIMEOUT_MS (250 ms), which the room would wait at most. */
const CUT_BEFORE_KILL_MS = 100;
/** The room's posts (services/room/src/store-redis.ts): the key whose master is killed. */
const POSTS_KEY = 'ar:room:{main}:posts';
/** Posts sent at once when the replica is cut off, besides the load's. */
const BURST = 10;
/** Same hash tag, so the same slot and master as the posts: where the cost of WAIT is measured. */
const PROBE_KEY = 'ar:room:{main}:bench-wait-probe';

interface Row {
  phase: string;
  from: number;
  to: number;
  stats: WindowStats;
  recovered: boolean;
}

interface Latencies {
  p50: number;
  p99: number;
}

const latencies = (ms: number[]): Latencies => {
  const sorted = [...ms].sort((a, b) => a - b);
  return { p50: percentile(sorted, 50), p99: percentile(sorted, 99) };
};
const shown = ({ p50, p99 }: Latencies): string => `p50 ${p50.toFixed(2)} ms, p99 ${p99.toFixed(2)} ms`;
const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

/**
 * The cost of WAIT where it is paid: on the master of the posts' slot, before the product runs, an
 * XADD like a post's, one at a time, alternately without and with WAIT for one replica (kit's
 * LuaScript.runAcknowledged on two clients, one opened with a replica wait), so that both see the
 * same machine.
 */
async function waitCost(url: string, count: number): Promise<{ without: Latencies; with: Latencies }> {
  const plain = await openRedis(url, 'bench-no-wait');
  const waiting = await openRedis(url, 'bench-wait', undefined, { replicaWait: { replicas: 1, timeoutMs: 1_000 } });
  const append = new LuaScript("return redis.call('XADD', KEYS[1], '*', 'text', ARGV[1])");
  const timed = async (client: RedisClient, into: number[], i: number): Promise<void> => {
    const started = performance.now();
    await append.runAcknowledged(client, [PROBE_KEY], [`probe ${i}`]);
    into.push(performance.now() - started);
  };
  const without: number[] = [];
  const withWait: number[] = [];
  try {
    for (let i = 0; i < 20; i += 1) await timed(i % 2 === 0 ? plain : waiting, [], i); // warm-up: scripts loaded, connections open
    for (let i = 0; i < count; i += 1) {
      await timed(plain, without, i);
      await timed(waiting, withWait, i);
    }
    await plain.del(PROBE_KEY);
  } finally {
    plain.disconnect();
    waiting.disconnect();
  }
  return { without: latencies(without), with: latencies(withWait) };
}

/** createPost over HTTP, one at a time, before the load: what an agent waits for a 201 in this run's mode. */
async function createPostLatency(origin: string, token: string, count: number): Promise<Latencies> {
  const ms: number[] = [];
  for (let i = 0; i < count; i += 1) {
    const started = performance.now();
    const response = await fetch(`${origin}/api/v1/posts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': crypto.randomUUID() },
      body: JSON.stringify({ text: `one at a time ${i}` }),
      signal: AbortSignal.timeout(DEADLINE_MS),
    });
    await response.text();
    if (response.status !== 201) throw new Error(`createPost answered ${response.status} before any fault`);
    ms.push(performance.now() - started);
  }
  return latencies(ms);
}

/**
 * SIGKILL to `pid` in `ms`, from a shell of its own (its timing does not depend on this process's
 * event loop); resolves with when the signal was sent (ms since the epoch).
 */
function killLater(pid: number, ms: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const shell = spawn('sh', ['-c', `sleep ${ms / 1000}; date +%s%3N; kill -9 ${pid}`], { stdio: ['ignore', 'pipe', 'inherit'] });
    let output = '';
    shell.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    shell.once('error', reject);
    shell.once('close', (code) => (code === 0 ? resolve(Number(output.trim())) : reject(new Error(`the shell that kills ${pid} exited with ${code}`))));
  });
}

/** One createPost: its status (or `network`/`timeout`), and the post's id and when its 201 came. */
async function postOnce(origin: string, token: string, text: string): Promise<{ status: string; id?: string; at: number }> {
  try {
    const response = await fetch(`${origin}/api/v1/posts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': crypto.randomUUID() },
      body: JSON.stringify({ text }),
      signal: AbortSignal.timeout(DEADLINE_MS),
    });
    const body = (await response.json()) as { id?: string };
    return { status: String(response.status), ...(response.status === 201 && body.id !== undefined ? { id: body.id } : {}), at: Date.now() };
  } catch (error) {
    return { status: (error as Error).name === 'TimeoutError' ? 'timeout' : 'network', at: Date.now() };
  }
}

/** Polls until the node on `port` is a replica in sync with its master. */
async function untilInSync(port: number): Promise<void> {
  const node = new Redis(port, '127.0.0.1', { protocol: 2, maxRetriesPerRequest: 0 });
  node.on('error', () => undefined);
  try {
    await until(
      `the node on port ${port} in sync as a replica`,
      async () => /role:slave[\s\S]*master_link_status:up/.test(await node.info('replication')),
      30_000,
    );
  } finally {
    node.disconnect();
  }
}

/** Polls until a node other than `port` is master of the posts' slot; answers how long that took and which. */
async function untilFailedOver(redis: LocalRedisCluster, port: number): Promise<{ ms: number; port: number }> {
  let master = port;
  const ms = await until(
    'a replica took over the posts',
    async () => {
      master = (await redis.masterOf(POSTS_KEY)).port;
      return master !== port;
    },
    30_000,
  );
  return { ms, port: master };
}

/** Every post id in the room's stream, read from the Redis Cluster itself. */
async function storedPostIds(url: string): Promise<Set<string>> {
  const client = await openRedis(url, 'bench-check');
  try {
    const ids = new Set<string>();
    let start = '-';
    for (;;) {
      const entries = (await client.xrange(POSTS_KEY, start, '+', 'COUNT', 1000)) as [string, string[]][];
      for (const [id] of entries) ids.add(id);
      if (entries.length < 1000) return ids;
      start = `(${entries[entries.length - 1]![0]}`;
    }
  } finally {
    client.disconnect();
  }
}

/** `agentroom_redis_unreplicated_writes_total`, summed over every process's `/metrics`. */
async function unreplicatedWrites(cluster: RunningCluster): Promise<number> {
  let total = 0;
  for (const url of Object.values(cluster.metrics)) {
    const text = await (await fetch(url, { signal: AbortSignal.timeout(5_000) })).text().catch(() => '');
    for (const line of text.split('\n')) if (line.startsWith('agentroom_redis_unreplicated_writes_total{')) total += Number(line.split(' ').pop());
  }
  return total;
}

/** Runs the scenario and answers the process's exit code: 0 when no acknowledged post was lost and every phase recovered by itself. */
export async function runRedisFailover(): Promise<number> {
  const began = Date.now();
  const say = (line: string): void => void process.stderr.write(`[redis-failover ${((Date.now() - began) / 1000).toFixed(1).padStart(5)} s] ${line}\n`);
  let redis: LocalRedisCluster | undefined;
  let cluster: RunningCluster | undefined;
  let load: Load | undefined;
  let feed: LiveFeed | undefined;
  let paused: number | undefined;
  const cleanUp = async (): Promise<void> => {
    // A paused node would never take the SIGTERM that stops it.
    if (paused !== undefined) process.kill(paused, 'SIGCONT');
    await load?.stop();
    await feed?.stop();
    await cluster?.stop();
    await redis?.stop();
  };
  const interrupted = (): void => void cleanUp().finally(() => process.exit(130));
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);

  try {
    redis = await startRedisCluster({ replicas: 1, appendfsync: 'everysec', nodeTimeoutMs: NODE_TIMEOUT_MS });
    say(`Redis Cluster of 3 masters and 3 replicas at ${redis.url} (cluster-node-timeout ${NODE_TIMEOUT_MS} ms, appendonly everysec)`);
    const cost = await waitCost(redis.url, 300);
    say(`WAIT measured on the posts' master: ${shown(cost.without)} without, ${shown(cost.with)} with`);

    cluster = await startCluster({ REDIS_URL: redis.url });
    // The room says at start whether it waits for replicas (REDIS_WAIT_REPLICAS unset: it does, on a cluster with replicas).
    const waits = cluster.lines.some((line) => line.includes('"service":"room"') && line.includes('acknowledged once'));
    say(`cluster ready at ${cluster.origin}; ${waits ? 'the room waits for a replica before it acknowledges a post' : 'the room waits for no replica'}`);
    const tokens = await Promise.all([1, 2, 3].map((i) => approvedToken(cluster!.origin, ['posts:write'], `failover-writer-${i}`)));
    const oneAtATime = await createPostLatency(cluster.origin, tokens[0]!, 100);
    say(`createPost one at a time: ${shown(oneAtATime)}`);

    feed = new LiveFeed(`${cluster.origin}/api/v1/posts/stream`, {}, (event, data) => (event === 'post' ? (data as { id: string }).id : undefined));
    await feed.start();
    load = new Load(cluster.origin, tokens, { readers: 3, writers: 3, deadlineMs: DEADLINE_MS, pauseMs: 20 });
    load.start();
    const loadStartedAt = Date.now();
    const rows: Row[] = [];
    const notes: string[] = [];
    // When the clients had followed: the first post sent after `at` that was answered 201.
    const firstAcknowledgedAfter = (at: number): string => {
      const answered = load!.samples
        .filter((sample) => sample.kind === 'write' && sample.outcome === 201 && sample.startedAt >= at)
        .map((sample) => sample.startedAt + sample.ms - at);
      return answered.length === 0 ? 'never' : seconds(Math.min(...answered));
    };

    let from = Date.now();
    await sleep(3_000);
    rows.push({ phase: 'none (baseline, 3 s)', from, to: Date.now(), stats: load.stats(from), recovered: true });

    // 1. The posts' master killed: its replica takes over, and every client has to find it.
    await sleep(1_000);
    const first = await redis.masterOf(POSTS_KEY);
    const slot = await redis.slotOf(POSTS_KEY);
    from = Date.now();
    await redis.kill(first.port);
    const failover = await untilFailedOver(redis, first.port);
    say(`killed the master of slot ${slot} (127.0.0.1:${first.port}, pid ${first.pid}); 127.0.0.1:${failover.port} took over after ${seconds(failover.ms)}`);
    let recovered = await load.settled();
    notes.push(
      `kill -9 of the posts' master (127.0.0.1:${first.port}, slot ${slot}): the cluster named its replica 127.0.0.1:${failover.port} master ${seconds(failover.ms)} after the kill; the first post sent after the kill was answered 201 ${firstAcknowledgedAfter(from)} after it.`,
    );
    await sleep(Math.max(0, from + MIN_WINDOW_MS - Date.now()));
    rows.push({ phase: `kill -9 the posts' master`, from, to: Date.now(), stats: load.stats(from), recovered });

    // 2. The killed node started again on its folder: it rejoins as the new master's replica.
    await sleep(1_000);
    from = Date.now();
    await redis.restart(first.port);
    await untilInSync(first.port);
    const rejoined = Date.now() - from;
    recovered = await load.settled();
    notes.push(`the killed node, started again on its folder, was the new master's replica, in sync, ${seconds(rejoined)} after its restart.`);
    await sleep(Math.max(0, from + MIN_WINDOW_MS - Date.now()));
    rows.push({ phase: 'it rejoins as a replica', from, to: Date.now(), stats: load.stats(from), recovered });

    // 3. The replica of the posts' master paused (SIGSTOP) and its replication link cut, so it
    // receives nothing more; the master killed CUT_BEFORE_KILL_MS later and the replica resumed
    // (SIGCONT) to take over. What the master acknowledged meanwhile is on no replica, unless the
    // room waited for one (and then it acknowledged nothing meanwhile).
    await sleep(1_000);
    const second = await redis.masterOf(POSTS_KEY);
    const master = new Redis(second.port, '127.0.0.1', { protocol: 2, maxRetriesPerRequest: 0 });
    master.on('error', () => undefined);
    const replicaPort = Number(/slave0:ip=[^,]+,port=(\d+)/.exec(await master.info('replication'))?.[1]);
    const replicaPid = redis.servers().find((node) => node.port === replicaPort)?.pid;
    if (replicaPid === undefined) throw new Error(`the posts' master 127.0.0.1:${second.port} has no running replica`);
    if (second.pid === undefined) throw new Error(`the posts' master 127.0.0.1:${second.port} is not running`);
    from = Date.now();
    process.kill(replicaPid, 'SIGSTOP');
    paused = replicaPid;
    const cut = Number(await master.call('CLIENT', 'KILL', 'TYPE', 'replica'));
    master.disconnect();
    const cutAt = Date.now();
    // The kill is timed by a shell of its own, so that this busy process cannot delay it past the
    // room's wait timeout; a burst of posts goes at the cut, so that some are surely made then.
    const killer = killLater(second.pid, CUT_BEFORE_KILL_MS);
    const burst = Promise.all(
      Array.from({ length: BURST }, (_, i) => postOnce(cluster!.origin, tokens[i % tokens.length]!, `while the replica is cut off ${i}`)),
    );
    const killedAt = await killer;
    await redis.kill(second.port);
    process.kill(replicaPid, 'SIGCONT');
    paused = undefined;
    const burstAnswers = await burst;
    // Counted with the load's posts: each one answered 201 must be in Redis afterwards too.
    for (const answer of burstAnswers) if (answer.id !== undefined) load.acknowledged.set(answer.id, answer.at);
    const secondFailover = await untilFailedOver(redis, second.port);
    say(
      `paused 127.0.0.1:${replicaPort}, cut ${cut} replication link(s) of 127.0.0.1:${second.port} and killed it ${killedAt - from} ms after the pause; 127.0.0.1:${secondFailover.port} took over after ${seconds(secondFailover.ms)}`,
    );
    recovered = await load.settled();
    const burstOutcomes = [...new Set(burstAnswers.map((answer) => answer.status))]
      .map((status) => `${status}×${burstAnswers.filter((answer) => answer.status === status).length}`)
      .join(' ');
    notes.push(
      `replica paused and cut off, master killed ${killedAt - from} ms after the pause (127.0.0.1:${second.port}): the ${BURST} posts sent at the cut were answered ${burstOutcomes}; its replica 127.0.0.1:${secondFailover.port} took over ${seconds(secondFailover.ms)} after the kill; the first post sent after the kill was answered 201 ${firstAcknowledgedAfter(killedAt)} after it.`,
    );
    await sleep(Math.max(0, from + MIN_WINDOW_MS - Date.now()));
    rows.push({ phase: `replica cut off, kill -9 ${CUT_BEFORE_KILL_MS} ms later`, from, to: Date.now(), stats: load.stats(from), recovered });

    await sleep(1_000);
    await load.stop();
    const loadStoppedAt = Date.now();
    const total = load.stats(loadStartedAt, loadStoppedAt + 1);
    // What storage holds is the truth: the API's first pages come from each edge's memory, which
    // may still show a post its master took and then lost (docs/decisions.md §15).
    const stored = await storedPostIds(redis.url);
    const listed = await listedPostIds(cluster.origin);
    const lost = [...load.acknowledged].filter(([id]) => !stored.has(id));
    const listedNotStored = [...listed].filter((id) => !stored.has(id));
    const missedByFeed = await feed.awaitKeys([...load.acknowledged.keys()], 5_000);
    const unreplicated = await unreplicatedWrites(cluster);
    const acknowledgedIn = (row: { from: number; to: number }): string[] =>
      [...load!.acknowledged].filter(([, at]) => at >= row.from && at < row.to).map(([id]) => id);

    const header = [
      'phase',
      'window',
      'requests',
      'errors',
      'error rate',
      'timeouts',
      'writes acknowledged',
      'writes found in Redis afterwards',
      'errors by kind',
      '503 without Retry-After',
      'slowest answer',
      'last error after',
    ];
    const cells = (phase: string, window: number, stats: WindowStats, acked: string[], last: string): string[] => [
      phase,
      seconds(window),
      String(stats.requests),
      String(stats.errors),
      `${((100 * stats.errors) / Math.max(1, stats.requests)).toFixed(1)} %`,
      String(stats.timeouts),
      String(acked.length),
      String(acked.filter((id) => stored.has(id)).length),
      Object.entries(stats.byOutcome)
        .map(([kind, n]) => `${kind}×${n}`)
        .join(' ') || '-',
      String(stats.withoutRetryAfter),
      `${(stats.maxMs / 1000).toFixed(2)} s`,
      last,
    ];
    const table = [
      ...rows.map((row) =>
        cells(
          row.phase,
          row.to - row.from,
          row.stats,
          acknowledgedIn(row),
          row.stats.errors === 0 ? '-' : `${seconds(row.stats.lastErrorAfterMs)}${row.recovered ? '' : ' (NOT RECOVERED)'}`,
        ),
      ),
      cells('whole run', loadStoppedAt - loadStartedAt, total, [...load.acknowledged.keys()], ''),
    ];
    const widths = header.map((h, i) => Math.max(h.length, ...table.map((r) => r[i]!.length)));
    const line = (row: string[]): string => `| ${row.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ')} |`;
    const out = [line(header), `|${widths.map((w, i) => (i === 0 ? `:${'-'.repeat(w + 1)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`, ...table.map(line)];
    process.stdout.write(`\n${out.join('\n')}\n\n`);
    process.stdout.write(
      [
        `Redis Cluster: 3 masters, 3 replicas, cluster-node-timeout ${NODE_TIMEOUT_MS} ms, appendonly everysec; the posts live in slot ${slot}. The room ${waits ? `acknowledges a post once a replica has it (WAIT 1, at most ${process.env.REDIS_WAIT_TIMEOUT_MS ?? '250'} ms)` : `waits for no replica (REDIS_WAIT_REPLICAS=${process.env.REDIS_WAIT_REPLICAS ?? ''})`}.`,
        ...notes.map((note) => `- ${note}`),
        `Acknowledged posts lost: ${lost.length} of ${load.acknowledged.size}${lost.length === 0 ? '' : ` (acknowledged ${lost.map(([, at]) => `${at - cutAt} ms`).join(', ')} after the replica was cut off)`}; the live posts feed missed ${missedByFeed.length} of them and was cut ${feed.cuts.length} time(s).`,
        `Posts listed through the API afterwards that Redis does not hold: ${listedNotStored.length}${listedNotStored.length === 0 ? '' : " (kept in an edge's memory, which saw them before their master died)"}.`,
        `Posts answered although no replica had them in time (agentroom_redis_unreplicated_writes_total): ${unreplicated}.`,
        `WAIT on the posts' master, an XADD one at a time (300 each, alternating): ${shown(cost.without)} without; ${shown(cost.with)} with WAIT 1.`,
        `createPost over HTTP, one at a time before the load (100 posts): ${shown(oneAtATime)}.`,
        `Error rate over the whole run: ${((100 * total.errors) / Math.max(1, total.requests)).toFixed(1)} % (${total.errors} of ${total.requests} requests; deadline ${DEADLINE_MS / 1000} s per request, ${total.timeouts} timed out).`,
        `Took ${((Date.now() - began) / 1000).toFixed(0)} s.`,
        '',
      ].join('\n'),
    );
    const ok = lost.length === 0 && missedByFeed.length === 0 && rows.every((row) => row.recovered);
    await cleanUp();
    return ok ? 0 : 1;
  } catch (error) {
    say(`failed: ${(error as Error).stack ?? String(error)}`);
    if (cluster) process.stderr.write(`last cluster lines:\n${cluster.lines.slice(-30).join('\n')}\n`);
    await cleanUp();
    return 1;
  } finally {
    process.off('SIGINT', interrupted);
    process.off('SIGTERM', interrupted);
  }
}
