// The memory row: the embedded default, run as `npm start` runs it (launcher/dist/start.js: one
// process, memory storage, its default retention), given 200,000 posts through REST as agents make
// them (a real token, a fresh Idempotency-Key each), its resident memory read from /proc as they
// arrive. Past the retention the room keeps a fixed number of posts, so RSS must stop growing: it is
// compared at the moment the bound was reached and at the end, and its growth from the start is
// shared by the posts kept. The record (every post, for search) runs in the same process: in memory,
// as by default, it keeps every post in RSS by design, so here it keeps them in a DATA_DIR folder
// and the row measures the room's bound; PGlite's own memory is the search-pglite row's. The record
// works on a thread of its own: the CPU a post counts until it holds every post, split by thread.
import { type ChildProcess, spawn } from 'node:child_process';
import { supervise } from './children.js';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { EMBEDDED_NODE_FLAGS, freePort } from '@agentroom/kit/local';
import { startCpu, threadCpuMs, totalCpuMs } from './cpu.js';
import { approvedToken } from '@agentroom/testkit';
import { progress } from './progress.js';
import { atMostCheck, figure, type Measurement } from './row.js';
import { requestSequence } from './target.js';

/** Posts made in all: twice the default retention. */
const POSTS = 200_000;
/** The room's default POSTS_RETENTION, which the product is left to use. */
const RETENTION = 100_000;
/** Posts between two samples of RSS. */
const STEP = 10_000;
/** Several connections, as several agents would post at once; few enough that no request waits out its deadline. */
const CONNECTIONS = 16;
const TARGET = { growthPercent: 10, bytesPerPost: 2_048 } as const;
const READY_TIMEOUT_MS = 60_000;
/** How long the record may take, after the load, to hold every post made. */
const CATCH_UP_TIMEOUT_MS = 120_000;
/** How long the product is left idle after the load, for the report's last sample. */
const IDLE_MS = 15_000;
const MIB = 1024 * 1024;

/** Resident memory of process `pid` now (VmRSS), in bytes. */
function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1];
  if (kib === undefined) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(kib) * 1024;
}

/** One sample: posts made so far, RSS and V8's heap (from the process's own /metrics). */
interface Sample {
  posts: number;
  rssMiB: number;
  heapUsedMiB: number;
  heapTotalMiB: number;
  externalMiB: number;
}

async function sample(posts: number, pid: number, metricsUrl: string): Promise<Sample> {
  const text = await (await fetch(metricsUrl)).text();
  const metric = (name: string): number => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN) / MIB;
  return {
    posts,
    rssMiB: rssBytes(pid) / MIB,
    heapUsedMiB: metric('nodejs_heap_size_used_bytes'),
    heapTotalMiB: metric('nodejs_heap_size_total_bytes'),
    externalMiB: metric('nodejs_external_memory_bytes'),
  };
}

const mib = (value: number): string => `${figure(value)} MiB`;

/** How many GetArchivedPost calls the record answered OK, from the product's /metrics. */
function recordGetCount(metrics: string): number {
  const line = metrics
    .split('\n')
    .find(
      (entry) => entry.startsWith('agentroom_grpc_server_handled_seconds_count{') && entry.includes('method="GetArchivedPost"') && entry.includes('code="OK"'),
    );
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** Posts the record has kept, from the product's /metrics (its thread's figures are the process's). */
function recordArchivedCount(metrics: string): number {
  return Number(/^agentroom_record_posts_archived_total (\S+)$/m.exec(metrics)?.[1] ?? 0);
}

/** Waits until the record has kept `posts` posts (two minutes at most); the milliseconds it took. */
async function recordCatchesUp(metricsUrl: string, posts: number): Promise<number> {
  const started = performance.now();
  while (recordArchivedCount(await (await fetch(metricsUrl)).text()) < posts) {
    if (performance.now() - started > CATCH_UP_TIMEOUT_MS) throw new Error(`the record did not hold the ${posts} posts made within ${CATCH_UP_TIMEOUT_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return performance.now() - started;
}

/** `npm start`'s process, ready: its origin and admin port, and how to stop it. */
interface Started {
  child: ChildProcess;
  pid: number;
  origin: string;
  metricsUrl: string;
  /** Why it exited, if it did before it was asked to. */
  exited(): string | undefined;
  stop(): Promise<void>;
}

/** `node <EMBEDDED_NODE_FLAGS> launcher/dist/start.js`, as `npm start` runs it, on free ports; ready once its admin port answers. */
async function startProduct(): Promise<Started> {
  const [port, adminPort] = [await freePort(), await freePort()];
  const origin = `http://127.0.0.1:${port}`;
  const script = fileURLToPath(new URL('../../launcher/dist/start.js', import.meta.url));
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-memory-record-'));
  // The flags of package.json's start script (kit's EMBEDDED_NODE_FLAGS).
  const child = spawn(process.execPath, [...EMBEDDED_NODE_FLAGS, script], {
    env: {
      ...process.env,
      PORT: String(port),
      ADMIN_PORT: String(adminPort),
      SITE_URL: origin,
      // The default retention, whatever the shell says.
      POSTS_RETENTION: undefined,
      REDIS_URL: undefined,
      // The record on disk (PGlite in a folder), not in memory: see the comment at the top.
      DATA_DIR: dataDir,
      DATABASE_URL: undefined,
      LOG_LEVEL: 'warn',
      LOG_FORMAT: 'json',
      // The load comes from one address and one token; the default daily quotas would turn it into 429s.
      QUOTA_PER_ADDRESS: '1000000000',
      QUOTA_PER_TOKEN: '1000000000',
      SHUTDOWN_GRACE_MS: '1000',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  child.stderr?.on('data', (chunk: Buffer) => process.stderr.write(`[memory] ${chunk.toString('utf8')}`));
  // Whatever happens to the bench, the product does not outlive it.
  const supervised = supervise(child);
  const stop = async (): Promise<void> => {
    await supervised.stop();
    rmSync(dataDir, { recursive: true, force: true });
  };
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (supervised.exitLine() !== undefined) throw new Error(`npm start's process exited (${supervised.exitLine()}) before it was ready; see its output above`);
    const live = await fetch(`http://127.0.0.1:${adminPort}/livez`).then(
      (response) => response.ok,
      () => false,
    );
    if (live) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`npm start's process was not ready within ${READY_TIMEOUT_MS} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return { child, pid: child.pid ?? 0, origin, metricsUrl: `http://127.0.0.1:${adminPort}/metrics`, exited: supervised.exitedWith, stop };
}

export async function memoryRow(): Promise<Measurement> {
  const server = await startProduct();
  try {
    const { pid, metricsUrl } = server;
    const token = await approvedToken(server.origin, ['posts:write'], 'bench-memory');
    const url = `${server.origin}/api/v1/posts`;
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${token}` };
    const body = JSON.stringify({ text: 'A benchmark post: one of many, each with its own Idempotency-Key.' });
    // The first post, which the retention must have let go by the end.
    const first = await fetch(url, { method: 'POST', headers: { ...headers, 'idempotency-key': 'memory-first' }, body });
    if (first.status !== 201) throw new Error(`POST ${url} answered ${first.status}: ${(await first.text()).slice(0, 500)}`);
    const firstId = ((await first.json()) as { id: string }).id;

    const samples = [await sample(1, pid, metricsUrl)];
    progress(`  memory: RSS ${mib(samples[0]!.rssMiB)} at the start; posting ${POSTS.toLocaleString('en-US')} posts over ${CONNECTIONS} connections…`);
    const next = requestSequence({ url, method: 'POST', headers, body, uniqueIdempotencyKey: true });
    const cpu = startCpu({ memory: pid });
    const threadsBefore = threadCpuMs(pid);
    const started = performance.now();
    let posted = 1;
    let failed = 0;
    let codes = '';
    let recordWaitMs = 0;
    while (posted < POSTS) {
      const amount = Math.min(STEP - (posted % STEP), POSTS - posted);
      const result = await autocannon({
        url,
        method: 'POST',
        headers,
        body,
        connections: CONNECTIONS,
        amount,
        requests: [{ setupRequest: (request: autocannon.Request) => ({ ...request, headers: next().headers }) }],
      });
      posted += result['2xx'];
      failed += amount - result['2xx'];
      if (result.non2xx > 0 || result.errors > 0) codes = `${codes} ${Object.keys(result.statusCodeStats ?? {}).join(',')} errors ${result.errors}`.trim();
      // The record archives on a thread of its own (docs/decisions.md §39), slower than the room
      // takes posts at full load: each step waits for it, so it never falls a whole window behind
      // (the posts it would then miss) and the CPU counted includes its archiving.
      recordWaitMs += await recordCatchesUp(metricsUrl, posted);
      const now = await sample(posted, pid, metricsUrl);
      samples.push(now);
      progress(
        `  memory: ${posted.toLocaleString('en-US')} posts, RSS ${mib(now.rssMiB)} (heap ${mib(now.heapUsedMiB)} used of ${mib(now.heapTotalMiB)}, external ${mib(now.externalMiB)})`,
      );
      if (failed > POSTS / 100) throw new Error(`${failed} posts failed (${codes})`);
    }
    const seconds = (performance.now() - started) / 1_000;
    const cpuMs = totalCpuMs(cpu.stop());
    const threadsAfter = threadCpuMs(pid);
    const cpuMsPerPostByThread = Object.fromEntries(
      Object.entries(threadsAfter)
        .map(([name, ms]) => [name, (ms - (threadsBefore[name] ?? 0)) / posted] as const)
        .filter(([, perPost]) => perPost > 0),
    );
    progress(
      `  memory: CPU ms a post by thread: ${Object.entries(cpuMsPerPostByThread)
        .map(([name, perPost]) => `${name} ${figure(perPost)}`)
        .join(', ')} (${figure(recordWaitMs / 1_000)} s of ${figure(seconds)} s waiting for the record)`,
    );

    // The room let the first post go: edge asks the record for a post only once the room answered
    // post-not-found, so the record's GetArchivedPost count moves by one, and the post still answers
    // 200 from the record (before the record, the check was a 404).
    const archivedReadsBefore = recordGetCount(await (await fetch(metricsUrl)).text());
    const first200 = await fetch(`${url}/${firstId}`);
    const fromRecord = recordGetCount(await (await fetch(metricsUrl)).text()) - archivedReadsBefore;
    // For the report: what V8 gives back once the load stops (its memory reducer runs after some seconds idle).
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
    const idle = await sample(posted, pid, metricsUrl);
    progress(`  memory: ${mib(idle.rssMiB)} after ${IDLE_MS / 1_000} s idle (heap ${mib(idle.heapUsedMiB)} used of ${mib(idle.heapTotalMiB)})`);
    const stored = Math.min(posted, RETENTION);
    const atStart = samples[0]!;
    const atBound = samples.find((s) => s.posts >= RETENTION) ?? samples.at(-1)!;
    const atEnd = samples.at(-1)!;
    const growth = ((atEnd.rssMiB - atBound.rssMiB) / atBound.rssMiB) * 100;
    const perPost = ((atEnd.rssMiB - atStart.rssMiB) * MIB) / stored;
    return {
      // No req/s: the table would show it as a share of bare's, which says nothing about memory.
      cpuMsPerRequest: cpuMs / posted,
      checks: [
        atMostCheck(
          'RSS growth, bound → end',
          growth,
          TARGET.growthPercent,
          '%',
          ` (${mib(atBound.rssMiB)} at ${atBound.posts.toLocaleString('en-US')} posts, ${mib(atEnd.rssMiB)} at ${atEnd.posts.toLocaleString('en-US')})`,
        ),
        atMostCheck(
          'RSS per stored post',
          perPost,
          TARGET.bytesPerPost,
          'B',
          ` ((${mib(atEnd.rssMiB)} − ${mib(atStart.rssMiB)}) / ${stored.toLocaleString('en-US')})`,
        ),
      ],
      problems: [
        ...(server.exited() === undefined ? [] : [`memory: npm start's process exited during the run (${server.exited()})`]),
        ...(failed > 0 ? [`memory: ${failed} posts were not answered 201 (${codes})`] : []),
        ...(first200.status === 200 && fromRecord === 1
          ? []
          : [
              `memory: the first post, ${firstId}, answered ${first200.status} after ${posted.toLocaleString('en-US')} posts, ${fromRecord === 1 ? 'from the record' : 'not from the record: the retention did not let it go'}; expected 200 from the record`,
            ]),
      ],
      details: {
        posts: posted,
        retention: RETENTION,
        stored,
        connections: CONNECTIONS,
        seconds,
        postsPerSecond: posted / seconds,
        cpuMsPerPostByThread,
        recordWaitMs,
        samples,
        idle,
        rssMiB: { start: atStart.rssMiB, bound: atBound.rssMiB, end: atEnd.rssMiB, idle: idle.rssMiB },
        growthPercent: growth,
        bytesPerStoredPost: perPost,
      },
    };
  } finally {
    await server.stop();
  }
}
