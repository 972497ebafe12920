// The record keeping up with the cluster (`npm run cluster`: the record service and the PostgreSQL
// the launcher starts for it): createPost at the cluster's full rate while the record's status is
// polled, so each acknowledged post's lag is when the record first held it minus when the room made
// it; then the record paused (SIGSTOP) while posts are made, and resumed: how fast it catches up;
// and the record process's own CPU per post archived.
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import { serviceClient } from '@agentroom/kit/grpc';
import { roomProto } from '@agentroom/proto';
import { Corpus } from './corpus.js';
import { processCpuMs, startCpu, totalCpuMs } from './cpu.js';
import { createPost } from './http-rows.js';
import { LOAD } from './load.js';
import { progress } from './progress.js';
import { recordClient, type RecordClient } from './record-process.js';
import { atLeastCheck, atMostCheck, figure, type Context, type Measurement } from './row.js';
import { percentile } from './stats.js';
import { requestSequence } from './target.js';

const TARGET = { lagP99Ms: 1_000, catchUpPerSecond: 5_000, cpuMsPerPost: 0.2 } as const;
/** How often the record's status is asked while posts arrive: the lag's resolution. */
const POLL_MS = 50;
/** Posts made while the record is paused. */
const OUTAGE_POSTS = 20_000;
const ROOM_PARALLEL = 25;
/** How long the record may take to hold every post made, after the load or after it is resumed. */
const SETTLE_TIMEOUT_MS = 120_000;

/** A stream id as two numbers, to compare. */
function key(id: string): [number, number] {
  const [ms = '0', seq = '0'] = id.split('-');
  return [Number(ms), Number(seq)];
}

function compare(a: string, b: string): number {
  const [am, as] = key(a);
  const [bm, bs] = key(b);
  return am - bm || as - bs;
}

function atOrAfter(a: string, b: string): boolean {
  return compare(a, b) >= 0;
}

interface Poll {
  /** Date.now() when the answer came: the room's ids carry its Date.now() at creation, on the same machine. */
  at: number;
  newestId: string;
  posts: number;
  lagMs: number;
}

/** Asks the record's status every POLL_MS until stopped; every answer kept. */
function poller(client: RecordClient): { polls: Poll[]; stop(): Promise<void> } {
  const polls: Poll[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const asked = performance.now();
      try {
        const status = await client.call('getRecordStatus', {});
        polls.push({ at: Date.now(), newestId: status.newestId, posts: Number(status.posts), lagMs: Number(status.lagMs) });
      } catch {
        // a poll lost is a gap in resolution, nothing more
      }
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, POLL_MS - (performance.now() - asked))));
    }
  })();
  return {
    polls,
    async stop() {
      running = false;
      await loop;
    },
  };
}

/** Waits until the record holds `id` (and, when given, at least `posts` posts); answers its status then, or undefined on timeout. */
async function waitForRecord(client: RecordClient, id: string, posts = 0): Promise<{ at: number; posts: number } | undefined> {
  const deadline = Date.now() + SETTLE_TIMEOUT_MS;
  while (Date.now() < deadline) {
    const status = await client.call('getRecordStatus', {}).catch(() => undefined);
    if (status !== undefined && status.newestId !== '' && atOrAfter(status.newestId, id) && Number(status.posts) >= posts)
      return { at: Date.now(), posts: Number(status.posts) };
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  return undefined;
}

/** The processes PostgreSQL forked (one backend per connection, and its workers): their CPU is the record's database's. */
function childrenOf(pid: number): Record<string, number> {
  const children: Record<string, number> = {};
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (parent === pid) children[`postgres-${entry}`] = Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return children;
}

/** CPU of a set of processes some of which may end meanwhile (a backend closing): those that do are left out. */
function cpuOf(pids: Record<string, number>): { stop(): number } {
  const started = Object.entries(pids).map(([name, pid]) => {
    try {
      return startCpu({ [name]: pid });
    } catch {
      return undefined;
    }
  });
  return {
    stop: () =>
      started.reduce((sum, cpu) => {
        try {
          return sum + (cpu ? totalCpuMs(cpu.stop()) : 0);
        } catch {
          return sum;
        }
      }, 0),
  };
}

/**
 * CPU of PostgreSQL (the postmaster and the processes it forked) over a span: a backend forked
 * meanwhile (the record's pool opens a connection again after its idle ones closed, as after a pause)
 * counts from its start; one that ended meanwhile is left out.
 */
function databaseCpu(postmaster: number): { stop(): number } {
  const before = new Map(
    Object.entries({ postgres: postmaster, ...childrenOf(postmaster) }).flatMap(([name, pid]) => {
      try {
        return [[pid, processCpuMs(name, pid)] as const];
      } catch {
        return [];
      }
    }),
  );
  return {
    stop: () =>
      Object.entries({ postgres: postmaster, ...childrenOf(postmaster) }).reduce((sum, [name, pid]) => {
        try {
          return sum + processCpuMs(name, pid) - (before.get(pid) ?? 0);
        } catch {
          return sum;
        }
      }, 0),
  };
}

export async function recordClusterRow({ servers }: Context): Promise<Measurement> {
  const cluster = await servers.cluster();
  if (cluster.record === undefined) throw new Error("the cluster's ready line names no record service: is the record part of `npm run cluster`?");
  if (cluster.room === undefined) throw new Error("the cluster's ready line names no room");
  const recordPid = cluster.pids.record;
  const postgresPid = cluster.pids.postgres;
  if (recordPid === undefined) throw new Error(`the cluster names no record process among ${Object.keys(cluster.pids).join(', ')}`);
  const client = recordClient(cluster.record);
  const room = serviceClient(roomProto().RoomService, cluster.room, { deadlineMs: 10_000 });
  const problems: string[] = [];
  try {
    // ---- lag at the cluster's full create rate -------------------------------------------------
    const target = await createPost(cluster);
    const next = requestSequence(target);
    const acked: Array<{ id: string; at: number }> = [];
    let collecting = false;
    const load = (seconds: number) =>
      autocannon({
        url: target.url,
        method: 'POST',
        headers: target.headers,
        body: target.body,
        connections: LOAD.connections,
        pipelining: LOAD.pipelining,
        duration: seconds,
        requests: [
          {
            setupRequest: (request: autocannon.Request) => ({ ...request, headers: next().headers }),
            onResponse: (status: number, body: string) => {
              if (!collecting || status !== 201) return;
              const id = /"id":"(\d+-\d+)"/.exec(body)?.[1];
              if (id !== undefined) acked.push({ id, at: Date.now() });
            },
          },
        ],
      });
    progress(
      `  record: createPost at full rate on the cluster (${LOAD.connections} connections), warm-up ${LOAD.warmupSeconds} s, measuring ${LOAD.measureSeconds} s, the record's status asked every ${POLL_MS} ms…`,
    );
    await load(LOAD.warmupSeconds);
    const before = await client.call('getRecordStatus', {});
    const polling = poller(client);
    const cpu = cpuOf({ record: recordPid });
    const database = postgresPid === undefined ? undefined : databaseCpu(postgresPid);
    collecting = true;
    const result = await load(LOAD.measureSeconds);
    collecting = false;
    // The newest post acknowledged, by id: the last answer to arrive may be an older post's (50 connections at once).
    const last = acked.reduce<{ id: string; at: number } | undefined>(
      (newest, post) => (newest === undefined || compare(post.id, newest.id) > 0 ? post : newest),
      undefined,
    );
    const settled = last === undefined ? undefined : await waitForRecord(client, last.id);
    await polling.stop();
    const recordCpuMs = cpu.stop();
    const databaseCpuMs = database?.stop();
    const after = await client.call('getRecordStatus', {});
    const archived = Number(after.posts) - Number(before.posts);
    if (result.non2xx > 0 || result.errors > 0) problems.push(`record: createPost answered ${result.non2xx} non-2xx and ${result.errors} errors`);
    if (settled === undefined) problems.push(`record: the record did not hold the last post acknowledged within ${SETTLE_TIMEOUT_MS / 1_000} s`);

    // Each post acknowledged: the first poll that saw the record hold it, minus its creation (its id's milliseconds).
    const polls = polling.polls;
    const lags: number[] = [];
    const sinceAck: number[] = [];
    let missing = 0;
    let p = 0;
    for (const post of [...acked].sort((a, b) => compare(a.id, b.id))) {
      while (p < polls.length && (polls[p]!.newestId === '' || !atOrAfter(polls[p]!.newestId, post.id))) p += 1;
      if (p === polls.length) {
        missing += 1;
        continue;
      }
      lags.push(polls[p]!.at - key(post.id)[0]);
      sinceAck.push(Math.max(0, polls[p]!.at - post.at));
    }
    if (missing > 0) problems.push(`record: ${missing} acknowledged posts were never seen held by the record while polled`);
    lags.sort((a, b) => a - b);
    sinceAck.sort((a, b) => a - b);
    const reported = polls.map((poll) => poll.lagMs).sort((a, b) => a - b);
    const lagP99 = percentile(lags, 99);
    const cpuPerPost = recordCpuMs / Math.max(1, archived);
    progress(
      `  record: ${acked.length.toLocaleString('en-US')} posts acknowledged (${Math.round(result.requests.average)} /s), lag p50 ${figure(percentile(lags, 50))} ms, p99 ${figure(lagP99)} ms; record CPU ${figure(cpuPerPost)} ms a post`,
    );

    // ---- catching up after an outage -------------------------------------------------------------
    progress(`  record: pausing the record (SIGSTOP), making ${OUTAGE_POSTS.toLocaleString('en-US')} posts in the room (gRPC, ${ROOM_PARALLEL} at once)…`);
    const heldBefore = Number(after.posts);
    const { agent } = await room.call('upsertAgent', { agent: { agentName: 'bench-record-outage', humanLabel: 'bench', scopes: ['posts:write'] } });
    if (!agent) throw new Error('UpsertAgent answered no agent');
    const corpus = new Corpus(Date.now());
    let lastId = '';
    let made = 0;
    process.kill(recordPid, 'SIGSTOP');
    let resumed = false;
    const resume = (): void => {
      if (!resumed) process.kill(recordPid, 'SIGCONT');
      resumed = true;
    };
    let catchUpSeconds: number;
    let catchUpCpuMs: number;
    let catchUpDatabaseCpuMs: number | undefined;
    try {
      const madeFrom = performance.now();
      for (let from = 0; from < OUTAGE_POSTS; from += ROOM_PARALLEL) {
        const created = await Promise.all(
          Array.from({ length: Math.min(ROOM_PARALLEL, OUTAGE_POSTS - from) }, (_, offset) =>
            room.call('createPost', { agentId: agent.id, text: corpus.at(from + offset).text, via: 'VIA_MCP', callKey: randomUUID() }),
          ),
        );
        made += created.length;
        for (const { post } of created) if (post !== null && post !== undefined && (lastId === '' || atOrAfter(post.id, lastId))) lastId = post.id;
      }
      progress(
        `  record: ${made.toLocaleString('en-US')} posts made in ${((performance.now() - madeFrom) / 1_000).toFixed(0)} s; resuming the record (SIGCONT)…`,
      );
      const catchUpCpu = cpuOf({ record: recordPid });
      const catchUpDatabase = postgresPid === undefined ? undefined : databaseCpu(postgresPid);
      const resumedAt = Date.now();
      resume();
      const caught = await waitForRecord(client, lastId, heldBefore + made);
      catchUpCpuMs = catchUpCpu.stop();
      catchUpDatabaseCpuMs = catchUpDatabase?.stop();
      if (caught === undefined) {
        problems.push(`record: after it was resumed, the record did not hold the ${made} posts within ${SETTLE_TIMEOUT_MS / 1_000} s`);
        catchUpSeconds = Number.NaN;
      } else catchUpSeconds = (caught.at - resumedAt) / 1_000;
    } finally {
      resume();
    }
    const catchUpRate = made / catchUpSeconds;
    progress(`  record: caught up with ${made.toLocaleString('en-US')} posts in ${figure(catchUpSeconds)} s (${figure(catchUpRate)} posts/s)`);
    return {
      p50Ms: percentile(lags, 50),
      p99Ms: lagP99,
      cpuMsPerRequest: cpuPerPost,
      checks: [
        atMostCheck(
          'record lag p99',
          lagP99,
          TARGET.lagP99Ms,
          'ms',
          ` at ${Math.round(result.requests.average).toLocaleString('en-US')} posts/s (${acked.length.toLocaleString('en-US')} posts)`,
        ),
        atLeastCheck(
          'catch-up after a pause',
          catchUpRate,
          TARGET.catchUpPerSecond,
          'posts/s',
          ` (${made.toLocaleString('en-US')} posts in ${figure(catchUpSeconds)} s)`,
        ),
        atMostCheck('record CPU per post', cpuPerPost, TARGET.cpuMsPerPost, 'ms', ` (${figure(recordCpuMs)} ms / ${archived.toLocaleString('en-US')} posts)`),
      ],
      problems,
      details: {
        createRate: result.requests.average,
        createP99Ms: result.latency.p99,
        acknowledged: acked.length,
        archived,
        polls: polls.length,
        lagMs: { p50: percentile(lags, 50), p90: percentile(lags, 90), p99: lagP99, max: lags.at(-1) },
        lagSinceAcknowledgedMs: { p50: percentile(sinceAck, 50), p99: percentile(sinceAck, 99) },
        recordReportedLagMs: { p50: percentile(reported, 50), p99: percentile(reported, 99) },
        recordCpuMs,
        recordCpuMsPerPost: cpuPerPost,
        postgresCpuMs: databaseCpuMs,
        postgresCpuMsPerPost: databaseCpuMs === undefined ? undefined : databaseCpuMs / Math.max(1, archived),
        outage: {
          posts: made,
          catchUpSeconds,
          postsPerSecond: catchUpRate,
          recordCpuMsPerPost: catchUpCpuMs / Math.max(1, made),
          postgresCpuMsPerPost: catchUpDatabaseCpuMs === undefined ? undefined : catchUpDatabaseCpuMs / Math.max(1, made),
        },
      },
    };
  } finally {
    room.close();
    client.close();
  }
}
