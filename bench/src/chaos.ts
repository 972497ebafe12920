// `npm run chaos`: the cluster (`npm run cluster`, two processes of every service by default) on a
// Redis with an append-only file (fsync every second), under a steady load that reaches every
// service (posts read and written, notifications and webhooks listed, the sign-in page) and two live
// feeds followed throughout; every service process killed with SIGKILL in turn and restarted by the
// launcher, then Redis killed with SIGKILL and started again on its port and folder. The router is
// the one entry point and is not killed. Prints one row per fault and exits non-zero if an
// acknowledged post was lost, or missed by a live feed, if the room did not recover by itself, or
// (with two replicas or more) if a kill cost 1 % of the requests made meanwhile or more.
// `npm run chaos -- --replicas 1` runs one process of each; `--redis-cluster` runs the Redis Cluster
// failover scenario of redis-failover.ts instead.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import {
  describeHealth,
  health,
  listedMessages,
  listedPostIds,
  LiveFeed,
  Load,
  type RunningCluster,
  sleep,
  startCluster,
  until,
  type WindowStats,
  approvedAgent,
  approvedToken,
} from '@agentroom/testkit';

const USAGE = 'npm run chaos [-- --replicas N] (N processes of every service, 1 to 4, 2 by default), or npm run chaos -- --redis-cluster';
const DEADLINE_MS = 5_000;
const REDIS_DOWN_MS = 3_000;
const MIN_WINDOW_MS = 5_000;
/** A process kill, with every service replicated, must cost less than this share of the requests of its window. */
const MAX_ERROR_RATE = 0.01;
/** How long the notifications of the last posts may take to arrive once the load stops (a killed notifier's lease lapses after 10 s). */
const NOTIFICATIONS_GRACE_MS = 30_000;

function refuse(message: string): never {
  process.stderr.write(`chaos: ${message}; usage: ${USAGE}\n`);
  process.exit(2);
}

let args: { replicas?: string; 'redis-cluster'?: boolean };
try {
  args = parseArgs({ options: { replicas: { type: 'string' }, 'redis-cluster': { type: 'boolean' } }, strict: true, allowPositionals: false }).values;
} catch (error) {
  refuse((error as Error).message.split('\n')[0] ?? 'bad arguments');
}

// The Redis Cluster failover scenario is a script of its own; this flag only hands over to it.
if (args['redis-cluster'] === true) {
  if (args.replicas !== undefined) refuse('--replicas does not apply to --redis-cluster');
  const script = new URL('./redis-failover.js', import.meta.url);
  if (!existsSync(fileURLToPath(script)))
    refuse('--redis-cluster runs bench/src/redis-failover.ts, which this checkout does not have (build it first: npm run build)');
  const failover: unknown = await import(script.href);
  if (typeof failover !== 'object' || failover === null || !('runRedisFailover' in failover) || typeof failover.runRedisFailover !== 'function') {
    refuse('bench/src/redis-failover.ts exports no runRedisFailover()');
  }
  const code: unknown = await (failover.runRedisFailover as () => Promise<unknown>)();
  process.exit(typeof code === 'number' ? code : 1);
}

const replicas = args.replicas === undefined ? 2 : Number(args.replicas);
if (!Number.isInteger(replicas) || replicas < 1 || replicas > 4) refuse(`--replicas ${JSON.stringify(args.replicas)} is not a whole number from 1 to 4`);
const replicated = replicas >= 2;

const began = Date.now();
const say = (line: string): void => void process.stderr.write(`[chaos ${((Date.now() - began) / 1000).toFixed(1).padStart(5)} s] ${line}\n`);

interface Row {
  fault: string;
  /** A kill of one process, held to MAX_ERROR_RATE when replicated. */
  kill: boolean;
  from: number;
  to: number;
  stats: WindowStats;
  recovered: boolean;
}

const dir = mkdtempSync(join(tmpdir(), 'agentroom-chaos-'));
let redis: LocalRedis | undefined;
let cluster: RunningCluster | undefined;
let load: Load | undefined;
const feeds: LiveFeed[] = [];

async function cleanUp(): Promise<void> {
  await load?.stop();
  await Promise.all(feeds.map((feed) => feed.stop()));
  await cluster?.stop();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void cleanUp().finally(() => process.exit(130)));

const rate = (stats: WindowStats): number => stats.errors / Math.max(1, stats.requests);
const percent = (stats: WindowStats): string => `${(100 * rate(stats)).toFixed(1)} %`;

function lastLine(pattern: RegExp): string {
  const line = [...(cluster?.lines ?? [])].reverse().find((l) => pattern.test(l));
  if (line === undefined) return '(no line)';
  try {
    return (JSON.parse(line) as { msg?: string }).msg ?? line;
  } catch {
    return line;
  }
}

try {
  redis = await startRedisServer({ dir, appendfsync: 'everysec' });
  say(`redis-server with appendonly yes, appendfsync everysec at ${redis.url}, folder ${dir}`);
  const count = String(replicas);
  cluster = await startCluster({
    REDIS_URL: redis.url,
    ROOM_REPLICAS: count,
    MESSAGING_REPLICAS: count,
    DELIVERY_REPLICAS: count,
    AUTH_REPLICAS: count,
    EDGE_REPLICAS: count,
  });
  // Every process the launcher started, in its order (room…, messaging…, delivery…, auth…, edge-…), but the router: the one way in.
  const services = Object.keys(cluster.metrics).filter((name) => name !== 'router');
  say(`cluster ready at ${cluster.origin}: ${services.join(', ')} and the router`);
  const writers = await Promise.all([1, 2, 3].map((i) => approvedToken(cluster!.origin, ['posts:write', 'messages:write'], `chaos-writer-${i}`)));
  const reader = await approvedAgent(cluster.origin, ['messages:read'], 'chaos-reader');
  // Every post mentions the reader, so each is a notification on its feed too (messaging's notifier,
  // under its lease); and the writers send the reader direct messages (messaging's SendMessage).
  load = new Load(cluster.origin, writers, {
    readers: 3,
    writers: 3,
    messageWriters: 2,
    messageTo: reader.agentId,
    inboxReaders: 1,
    webhookReaders: 1,
    pageReaders: 1,
    readerToken: reader.token,
    mention: `@${reader.agentId}`,
    deadlineMs: DEADLINE_MS,
    pauseMs: 20,
  });
  const postsFeed = new LiveFeed(`${cluster.origin}/api/v1/posts/stream`, {}, (event, data) => (event === 'post' ? (data as { id: string }).id : undefined));
  const notificationsFeed = new LiveFeed(`${cluster.origin}/api/v1/notifications/stream`, { authorization: `Bearer ${reader.token}` }, (event, data) =>
    event === 'notification' ? (data as { post?: { id: string } }).post?.id : undefined,
  );
  feeds.push(postsFeed, notificationsFeed);
  await Promise.all(feeds.map((feed) => feed.start()));
  load.start();
  const loadStartedAt = Date.now();
  const rows: Row[] = [];

  let from = Date.now();
  await sleep(3_000);
  rows.push({ fault: 'none (baseline, 3 s)', kill: false, from, to: Date.now(), stats: load.stats(from), recovered: true });

  for (const name of services) {
    await sleep(1_000);
    const before = cluster.restarts(name);
    const pid = cluster.pid(name);
    from = Date.now();
    process.kill(pid, 'SIGKILL');
    const newPid = await cluster.restarted(name, before);
    say(`killed ${name} (pid ${pid}); launcher: "${lastLine(new RegExp(`"process":"${name}".*restarting it`))}"; now pid ${newPid}`);
    const recovered = await load.settled();
    // Back in service before the next kill, so no service is ever short of two replicas at once.
    await cluster.ready(name);
    say(`${name} ready again ${((Date.now() - from) / 1000).toFixed(1)} s after the kill`);
    // Every window at least MIN_WINDOW_MS long, so rows compare.
    await sleep(Math.max(0, from + MIN_WINDOW_MS - Date.now()));
    rows.push({ fault: `kill -9 ${name}`, kill: true, from, to: Date.now(), stats: load.stats(from), recovered });
  }

  // Redis: killed, down for a while (health and writes observed), started again on its port and folder.
  await sleep(1_000);
  const restartsBefore = services.map((n) => cluster!.restarts(n)).join();
  from = Date.now();
  const redisPort = redis.port;
  process.kill(redis.pid!, 'SIGKILL');
  await redis.stop(); // reaps the killed process; the folder is ours and stays
  const killedAt = Date.now();
  await sleep(500);
  const down = await health(cluster.origin);
  say(`Redis killed; /health answers ${down.status} ${describeHealth(down.body)}`);
  await sleep(REDIS_DOWN_MS - 500);
  const downWrites = load.samples.filter((s) => s.kind === 'write' && s.startedAt >= killedAt + 500 && s.startedAt < Date.now());
  const slowestDownWrite = Math.max(0, ...downWrites.map((s) => s.ms));
  redis = await startRedisServer({ port: redisPort, dir, appendfsync: 'everysec' });
  say(`Redis started again on port ${redisPort}, same folder`);
  const healthyAfter = await until('health answers 200 again', async () => (await health(cluster!.origin)).status === 200, 30_000);
  const recovered = await load.settled();
  const restartsAfter = services.map((n) => cluster!.restarts(n)).join();
  rows.push({ fault: `kill -9 redis, ${REDIS_DOWN_MS / 1000} s down`, kill: false, from, to: Date.now(), stats: load.stats(from), recovered });

  await sleep(1_000);
  await load.stop();
  const loadStoppedAt = Date.now();
  const total = load.stats(loadStartedAt, loadStoppedAt + 1);
  const listed = await listedPostIds(cluster.origin);
  const lost = [...load.acknowledged].filter(([id]) => !listed.has(id));
  // Each message's text is its own: one listed twice was sent twice.
  const inbox = await listedMessages(cluster.origin, reader.token);
  const inboxIds = new Set(inbox.map((message) => message.id));
  const messagesLost = [...load.messagesAcknowledged].filter(([id]) => !inboxIds.has(id));
  const sentTwice = inbox.length - new Set(inbox.map((message) => message.text)).size;
  const acknowledgedIds = [...load.acknowledged.keys()];
  const missedByPostsFeed = await postsFeed.awaitKeys(acknowledgedIds, 5_000);
  say(`load stopped; waiting for the notifications of ${acknowledgedIds.length} posts`);
  const missedByNotifications = await notificationsFeed.awaitKeys(acknowledgedIds, NOTIFICATIONS_GRACE_MS);
  await Promise.all(feeds.map((feed) => feed.stop()));
  const acknowledgedIn = (row: { from: number; to: number }): string[] =>
    [...load!.acknowledged].filter(([, at]) => at >= row.from && at < row.to).map(([id]) => id);
  const cutsIn = (row: { from: number; to: number }): number =>
    feeds.reduce((sum, feed) => sum + feed.cuts.filter((at) => at >= row.from && at < row.to).length, 0);

  const header = [
    'fault',
    'window',
    'requests',
    'errors',
    'error rate',
    'timeouts',
    'posts acknowledged',
    'posts found afterwards',
    'errors by kind',
    '503 without Retry-After',
    'slowest answer',
    'last error after',
    'live feeds cut',
  ];
  const table = [
    ...rows.map((row) => {
      const acked = acknowledgedIn(row);
      return [
        row.fault,
        `${((row.to - row.from) / 1000).toFixed(1)} s`,
        String(row.stats.requests),
        String(row.stats.errors),
        percent(row.stats),
        String(row.stats.timeouts),
        String(acked.length),
        String(acked.filter((id) => listed.has(id)).length),
        Object.entries(row.stats.byOutcome)
          .map(([kind, n]) => `${kind}×${n}`)
          .join(' ') || '-',
        String(row.stats.withoutRetryAfter),
        `${(row.stats.maxMs / 1000).toFixed(2)} s${row.stats.slowest === undefined ? '' : ` (${row.stats.slowest})`}`,
        row.stats.errors === 0 ? '-' : `${(row.stats.lastErrorAfterMs / 1000).toFixed(1)} s${row.recovered ? '' : ' (NOT RECOVERED)'}`,
        String(cutsIn(row)),
      ];
    }),
    [
      'whole run',
      `${((loadStoppedAt - loadStartedAt) / 1000).toFixed(1)} s`,
      String(total.requests),
      String(total.errors),
      percent(total),
      String(total.timeouts),
      String(load.acknowledged.size),
      String(load.acknowledged.size - lost.length),
      Object.entries(total.byOutcome)
        .map(([kind, n]) => `${kind}×${n}`)
        .join(' ') || '-',
      String(total.withoutRetryAfter),
      `${(total.maxMs / 1000).toFixed(2)} s${total.slowest === undefined ? '' : ` (${total.slowest})`}`,
      '',
      String(cutsIn({ from: loadStartedAt, to: loadStoppedAt })),
    ],
  ];
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((r) => r[i]!.length)));
  const line = (cells: string[]): string => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ')} |`;
  const out: string[] = [
    line(header),
    `|${widths.map((w, i) => (i === 0 ? `:${'-'.repeat(w + 1)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`,
    ...table.map(line),
  ];
  process.stdout.write(`\n${out.join('\n')}\n\n`);

  // Lost posts, if any, against Redis's window: acknowledged within a second before it was killed.
  const lostInWindow = lost.filter(([, at]) => at >= killedAt - 1_000 && at <= killedAt);
  const overTarget = rows.filter((row) => row.kill && rate(row.stats) >= MAX_ERROR_RATE);
  const kills = rows.filter((row) => row.kill);
  const worstKill = kills.reduce<Row | undefined>((worst, row) => (worst === undefined || rate(row.stats) > rate(worst.stats) ? row : worst), undefined);
  process.stdout.write(
    [
      `${replicas} process(es) of every service (${services.join(', ')}), the router in front (not killed: it is the one entry point).`,
      `Error rate over the whole run: ${percent(total)} (${total.errors} of ${total.requests} requests; deadline ${DEADLINE_MS / 1000} s per request, ${total.timeouts} timed out).`,
      `Kills: the worst window ${worstKill ? `${worstKill.fault}, ${percent(worstKill.stats)}` : '-'}; ${replicated ? `${overTarget.length === 0 ? 'every one' : `${kills.length - overTarget.length} of ${kills.length}`} under the ${MAX_ERROR_RATE * 100} % target${overTarget.length === 0 ? '' : ` (over it: ${overTarget.map((row) => row.fault).join(', ')})`}` : `no target with one replica of each service (a kill leaves its service without a process until the restart)`}.`,
      `Acknowledged posts lost: ${lost.length} (${lostInWindow.length} within the second before Redis was killed, AOF everysec's window; ${lost.length - lostInWindow.length} outside it).`,
      `Acknowledged direct messages lost: ${messagesLost.length} of ${load.messagesAcknowledged.size} (${messagesLost.filter(([, at]) => at >= killedAt - 1_000 && at <= killedAt).length} within the second before Redis was killed); sent twice: ${sentTwice}.`,
      `Live feeds: the posts feed missed ${missedByPostsFeed.length} of ${acknowledgedIds.length} acknowledged posts and was cut ${postsFeed.cuts.length} time(s); the notifications feed missed ${missedByNotifications.length} and was cut ${notificationsFeed.cuts.length} time(s) (each resumed with Last-Event-ID once a replica took it).`,
      `Redis down: /health answered ${down.status} ${describeHealth(down.body)}; ${downWrites.length} writes tried while it was down answered ${[...new Set(downWrites.map((s) => String(s.outcome)))].map((o) => `${o}×${downWrites.filter((s) => String(s.outcome) === o).length}`).join(' ') || '-'}, the slowest in ${(slowestDownWrite / 1000).toFixed(2)} s; /health answered 200 again ${(healthyAfter / 1000).toFixed(1)} s after Redis restarted; no service process restarted meanwhile: ${restartsBefore === restartsAfter ? 'yes' : 'NO'}.`,
      `Took ${((Date.now() - began) / 1000).toFixed(0)} s.`,
      '',
    ].join('\n'),
  );
  const ok =
    lost.length === 0 &&
    messagesLost.length === 0 &&
    sentTwice === 0 &&
    missedByPostsFeed.length === 0 &&
    missedByNotifications.length === 0 &&
    rows.every((row) => row.recovered) &&
    (!replicated || overTarget.length === 0) &&
    restartsBefore === restartsAfter &&
    down.status === 503;
  await cleanUp();
  process.exit(ok ? 0 : 1);
} catch (error) {
  say(`failed: ${(error as Error).stack ?? String(error)}`);
  if (cluster) process.stderr.write(`last cluster lines:\n${cluster.lines.slice(-30).join('\n')}\n`);
  await cleanUp();
  process.exit(1);
}
