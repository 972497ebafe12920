// createPost on two builds of the cluster side by side: this checkout and another one (an earlier
// commit, built), both up at once and loaded in turn at one fixed rate, so that a busy machine weighs
// on both alike. Per round: latency p50/p99 and the CPU each process of the hot path (edge, room)
// spent per post, from /proc; the record's own CPU per post where it runs. Medians over the rounds.
//   npm run bench:compare -- <other checkout> [rounds] [posts per second]
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { approvedToken } from '@agentroom/testkit';
import { z } from 'zod';
import { processCpuMs } from './cpu.js';

const announced = z.object({ port: z.number().int(), pids: z.record(z.string(), z.number().int()) });
const WARM_S = 2;
const MEASURED_S = 10;
const CONNECTIONS = 20;

interface Side {
  name: string;
  child: ChildProcess;
  origin: string;
  token: string;
  /** The processes of the hot path and the record, by the cluster's names (edge-1, room, record). */
  pids: Record<string, number>;
  rounds: Round[];
}

interface Round {
  perSecond: number;
  failed: number;
  p50Ms: number;
  p99Ms: number;
  /** Milliseconds of CPU per acknowledged post. */
  edge: number;
  room: number;
  record: number;
}

async function startSide(name: string, checkout: string): Promise<Side> {
  const server = resolve(checkout, 'bench/dist/cluster-server.js');
  if (!existsSync(server)) throw new Error(`${server} is missing: run npm ci && npm run build in ${checkout}`);
  const child = spawn(process.execPath, [server], { cwd: checkout, stdio: ['ignore', 'pipe', 'inherit', 'ipc'], env: { ...process.env, EDGE_REPLICAS: '1' } });
  const line = await new Promise<string>((done, fail) => {
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).once('line', done);
    child.once('exit', (code) => fail(new Error(`the ${name} cluster exited (${code}) before it was ready`)));
  });
  const ready = announced.parse(JSON.parse(line));
  const origin = `http://127.0.0.1:${ready.port}`;
  const pids = Object.fromEntries(Object.entries(ready.pids).filter(([process]) => /^(edge-\d+|room|record)$/.test(process)));
  return { name, child, origin, token: await approvedToken(origin, ['posts:write'], `compare-${name}`), pids, rounds: [] };
}

function cpuNow(pids: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(pids).map(([process, pid]) => [process, processCpuMs(process, pid)]));
}

function load(side: Side, rate: number, seconds: number): Promise<autocannon.Result> {
  return autocannon({
    url: `${side.origin}/api/v1/posts`,
    method: 'POST',
    connections: CONNECTIONS,
    overallRate: rate,
    duration: seconds,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${side.token}` },
    body: JSON.stringify({ text: 'A benchmark post: one of many, each with its own Idempotency-Key.' }),
    requests: [{ setupRequest: (request) => ({ ...request, headers: { ...request.headers, 'idempotency-key': randomUUID() } }) }],
  });
}

async function round(side: Side, rate: number): Promise<Round> {
  await load(side, rate, WARM_S);
  const before = cpuNow(side.pids);
  const result = await load(side, rate, MEASURED_S);
  const after = cpuNow(side.pids);
  const posts = Math.max(1, result['2xx']);
  const per = (match: (process: string) => boolean): number =>
    Object.keys(side.pids)
      .filter(match)
      .reduce((sum, process) => sum + ((after[process] ?? 0) - (before[process] ?? 0)) / posts, 0);
  return {
    perSecond: result['2xx'] / MEASURED_S,
    failed: result.non2xx + result.errors,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    edge: per((process) => process.startsWith('edge')),
    room: per((process) => process === 'room'),
    record: per((process) => process === 'record'),
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

const [other, roundsArg = '6', rateArg = '400'] = process.argv.slice(2);
if (other === undefined) throw new Error('usage: npm run bench:compare -- <other checkout, built> [rounds] [posts per second]');
const rounds = Number(roundsArg);
const rate = Number(rateArg);
const here = fileURLToPath(new URL('../..', import.meta.url));
const sides = [await startSide('other', resolve(other)), await startSide('this', here)];
try {
  for (let i = 0; i < rounds; i += 1) {
    // Each round in the other order than the one before: neither build always goes first.
    for (const side of i % 2 === 0 ? sides : [...sides].reverse()) {
      const measured = await round(side, rate);
      side.rounds.push(measured);
      process.stdout.write(
        `round ${i + 1} ${side.name}: ${JSON.stringify(measured, (_, value: unknown) => (typeof value === 'number' ? Number(value.toFixed(3)) : value))}\n`,
      );
    }
  }
  process.stdout.write(`createPost at ${rate} posts/s, ${rounds} rounds of ${MEASURED_S} s each, medians:\n`);
  for (const side of sides) {
    const m = (key: keyof Round): string => median(side.rounds.map((r) => r[key])).toFixed(3);
    process.stdout.write(
      `  ${side.name === 'this' ? `this checkout (${here})` : `other (${resolve(other)})`}: p50 ${m('p50Ms')} ms, p99 ${m('p99Ms')} ms; CPU per post: edge ${m('edge')} ms, room ${m('room')} ms, record ${m('record')} ms; failed ${side.rounds.reduce((sum, r) => sum + r.failed, 0)}\n`,
    );
  }
} finally {
  for (const side of sides) side.child.kill('SIGTERM');
}
