// An open-loop load at a fixed rate: request i is due at start + i / rate, whatever the answers
// before it did, and its latency counts from when it was due, so a stall shows in the percentiles
// instead of slowing the load down. (autocannon's overallRate sends each second's share in a
// burst at the start of the second, which measures latency at full concurrency, not at the rate.)
import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { type LoadTarget, type Outcome, requestSequence } from './target.js';
import { percentile } from './stats.js';

/** As autocannon's default: an answer slower than this counts as a timeout. */
const TIMEOUT_MS = 10_000;

export async function steadyLoad(target: LoadTarget, rate: number, seconds: number, connections: number): Promise<Outcome> {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  const next = requestSequence(target);
  const url = new URL(target.url);
  const latencies: number[] = [];
  const codes = new Map<number, number>();
  let errors = 0;
  let timeouts = 0;
  let mismatches = 0;
  const inFlight = new Set<Promise<void>>();

  const send = (dueAt: number): Promise<void> =>
    new Promise<void>((resolve) => {
      const { path, headers } = next();
      const length = target.body === undefined ? {} : { 'content-length': String(Buffer.byteLength(target.body)) };
      const req = request(
        {
          host: url.hostname,
          port: url.port,
          path: path ?? `${url.pathname}${url.search}`,
          method: target.method ?? 'GET',
          headers: { ...headers, ...length },
          agent,
          timeout: TIMEOUT_MS,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => target.expectBody && chunks.push(chunk));
          res.on('end', () => {
            const status = res.statusCode ?? 0;
            codes.set(status, (codes.get(status) ?? 0) + 1);
            if (status >= 200 && status < 300) latencies.push(performance.now() - dueAt);
            if (target.expectBody && !target.expectBody.check(Buffer.concat(chunks).toString('utf8'))) mismatches += 1;
            resolve();
          });
        },
      );
      req.on('timeout', () => {
        timeouts += 1;
        req.destroy(new Error('timeout'));
      });
      req.on('error', () => {
        errors += 1;
        resolve();
      });
      req.end(target.body);
    });

  const interval = 1_000 / rate;
  const start = performance.now();
  const end = start + seconds * 1_000;
  let due = start;
  await new Promise<void>((done) => {
    const tick = (): void => {
      // Everything due by now goes out now: a late timer does not lower the rate.
      for (const now = performance.now(); due <= now && due < end; due += interval) {
        const sent = send(due);
        inFlight.add(sent);
        void sent.then(() => inFlight.delete(sent));
      }
      if (due < end) setTimeout(tick, Math.max(0, due - performance.now()));
      else done();
    };
    tick();
  });
  await Promise.all(inFlight);
  const elapsed = (performance.now() - start) / 1_000;
  agent.destroy();

  latencies.sort((a, b) => a - b);
  const completed = [...codes.values()].reduce((sum, count) => sum + count, 0);
  const other = [...codes].filter(([code]) => code < 200 || code >= 300);
  return {
    reqPerSec: completed / elapsed,
    requests: completed,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    non2xx: other.reduce((sum, [, count]) => sum + count, 0),
    codes: other.map(([code, count]) => `${code} ×${count}`).join(', '),
    errors,
    timeouts,
    mismatches,
  };
}
