// `npm run chaos`: the cluster (`npm run cluster`, two edge processes) on a Redis with an
// append-only file (fsync every second), under a steady load of readers and writers; each
// service process killed with SIGKILL in turn and restarted by the launcher, then Redis killed
// with SIGKILL and started again on its port and folder. Prints one row per fault and exits
// non-zero if an acknowledged post was lost (beyond Redis's documented one-second window) or the
// room did not recover by itself.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type LocalRedis, startRedisServer } from '@agentroom/kit';
import { describeHealth, health, listedPostIds, Load, type RunningCluster, sleep, startCluster, until, type WindowStats } from './faults.js';
import { approvedToken } from './human.js';

const DEADLINE_MS = 5_000;
const REDIS_DOWN_MS = 3_000;
const MIN_WINDOW_MS = 5_000;
const began = Date.now();
const say = (line: string): void => void process.stderr.write(`[chaos ${((Date.now() - began) / 1000).toFixed(1).padStart(5)} s] ${line}\n`);

interface Row {
  fault: string;
  from: number;
  to: number;
  stats: WindowStats;
  recovered: boolean;
}

const dir = mkdtempSync(join(tmpdir(), 'agentroom-chaos-'));
let redis: LocalRedis | undefined;
let cluster: RunningCluster | undefined;
let load: Load | undefined;

async function cleanUp(): Promise<void> {
  await load?.stop();
  await cluster?.stop();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void cleanUp().finally(() => process.exit(130)));

const percent = (stats: WindowStats): string => `${((100 * stats.errors) / Math.max(1, stats.requests)).toFixed(1)} %`;

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
  cluster = await startCluster({ REDIS_URL: redis.url, EDGE_REPLICAS: '2' });
  say(`cluster ready at ${cluster.origin} (edges ${cluster.edges.join(', ')})`);
  const tokens = await Promise.all([1, 2, 3].map((i) => approvedToken(cluster!.origin, ['posts:write'], `chaos-writer-${i}`)));
  load = new Load(cluster.origin, tokens, { readers: 3, writers: 3, deadlineMs: DEADLINE_MS, pauseMs: 20 });
  load.start();
  const loadStartedAt = Date.now();
  const rows: Row[] = [];

  let from = Date.now();
  await sleep(3_000);
  rows.push({ fault: 'none (baseline, 3 s)', from, to: Date.now(), stats: load.stats(from), recovered: true });

  for (const name of ['room', 'messaging', 'auth', ...cluster.edges.map((_, i) => `edge-${i + 1}`)]) {
    await sleep(1_000);
    const before = cluster.restarts(name);
    const pid = cluster.pid(name);
    from = Date.now();
    process.kill(pid, 'SIGKILL');
    const newPid = await cluster.restarted(name, before);
    say(`killed ${name} (pid ${pid}); launcher: "${lastLine(new RegExp(`"process":"${name}".*restarting it`))}"; now pid ${newPid}`);
    const recovered = await load.settled();
    // Every window at least MIN_WINDOW_MS long, so rows compare.
    await sleep(Math.max(0, from + MIN_WINDOW_MS - Date.now()));
    rows.push({ fault: `kill -9 ${name}`, from, to: Date.now(), stats: load.stats(from), recovered });
  }

  // Redis: killed, down for a while (health and writes observed), started again on its port and folder.
  await sleep(1_000);
  const restartsBefore = ['room', 'messaging', 'auth', ...cluster.edges.map((_, i) => `edge-${i + 1}`)].map((n) => cluster!.restarts(n)).join();
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
  const restartsAfter = ['room', 'messaging', 'auth', ...cluster.edges.map((_, i) => `edge-${i + 1}`)].map((n) => cluster!.restarts(n)).join();
  rows.push({ fault: `kill -9 redis, ${REDIS_DOWN_MS / 1000} s down`, from, to: Date.now(), stats: load.stats(from), recovered });

  await sleep(1_000);
  await load.stop();
  const loadStoppedAt = Date.now();
  const total = load.stats(loadStartedAt, loadStoppedAt);
  const listed = await listedPostIds(cluster.origin);
  const lost = [...load.acknowledged].filter(([id]) => !listed.has(id));
  const acknowledgedIn = (row: { from: number; to: number }): string[] => [...load!.acknowledged].filter(([, at]) => at >= row.from && at < row.to).map(([id]) => id);

  const header = ['fault', 'window', 'requests', 'errors', 'error rate', 'timeouts', 'writes acknowledged', 'writes found afterwards', 'errors by kind', '503 without Retry-After', 'slowest answer', 'last error after'];
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
        Object.entries(row.stats.byOutcome).map(([kind, n]) => `${kind}×${n}`).join(' ') || '-',
        String(row.stats.withoutRetryAfter),
        `${(row.stats.maxMs / 1000).toFixed(2)} s`,
        row.stats.errors === 0 ? '-' : `${(row.stats.lastErrorAfterMs / 1000).toFixed(1)} s${row.recovered ? '' : ' (NOT RECOVERED)'}`,
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
      Object.entries(total.byOutcome).map(([kind, n]) => `${kind}×${n}`).join(' ') || '-',
      String(total.withoutRetryAfter),
      `${(total.maxMs / 1000).toFixed(2)} s`,
      '',
    ],
  ];
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((r) => r[i]!.length)));
  const line = (cells: string[]): string => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ')} |`;
  const out: string[] = [line(header), `|${widths.map((w, i) => (i === 0 ? `:${'-'.repeat(w + 1)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`, ...table.map(line)];
  process.stdout.write(`\n${out.join('\n')}\n\n`);

  // Lost posts, if any, against Redis's window: acknowledged within a second before it was killed.
  const lostInWindow = lost.filter(([, at]) => at >= killedAt - 1_000 && at <= killedAt);
  const lostOutside = lost.length - lostInWindow.length;
  process.stdout.write(
    [
      `Error rate over the whole run: ${percent(total)} (${total.errors} of ${total.requests} requests; deadline ${DEADLINE_MS / 1000} s per request, ${total.timeouts} timed out).`,
      `Acknowledged posts lost: ${lost.length} (${lostInWindow.length} within the second before Redis was killed, AOF everysec's window; ${lostOutside} outside it).`,
      `Redis down: /health answered ${down.status} ${describeHealth(down.body)}; ${downWrites.length} writes tried while it was down answered ${[...new Set(downWrites.map((s) => String(s.outcome)))].map((o) => `${o}×${downWrites.filter((s) => String(s.outcome) === o).length}`).join(' ') || '-'}, the slowest in ${(slowestDownWrite / 1000).toFixed(2)} s; /health answered 200 again ${(healthyAfter / 1000).toFixed(1)} s after Redis restarted; no service process restarted meanwhile: ${restartsBefore === restartsAfter ? 'yes' : 'NO'}.`,
      `Took ${((Date.now() - began) / 1000).toFixed(0)} s.`,
      '',
    ].join('\n'),
  );
  const ok = lostOutside === 0 && rows.every((row) => row.recovered) && restartsBefore === restartsAfter && down.status === 503;
  await cleanUp();
  process.exit(ok ? 0 : 1);
} catch (error) {
  say(`failed: ${(error as Error).stack ?? String(error)}`);
  if (cluster) process.stderr.write(`last cluster lines:\n${cluster.lines.slice(-30).join('\n')}\n`);
  await cleanUp();
  process.exit(1);
}
