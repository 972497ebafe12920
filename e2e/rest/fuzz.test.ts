/**
 * Schemathesis over the product's own `/openapi.json`, with a real token holding every scope: no
 * answer is a 5xx, and every answer conforms to the document (status, content type, headers,
 * body). `npm test` runs a bounded number of examples per operation; `npm run fuzz` runs the same
 * file with FUZZ_MAX_EXAMPLES (and FUZZ_MAX_TIME) set higher and shows schemathesis's own output.
 * Every phase runs (examples, coverage, fuzzing, stateful) with every check. FUZZ_SEED picks another
 * seed, FUZZ_CHECKS and FUZZ_PHASES fewer checks or phases, and FUZZ_OUTPUT keeps the whole report
 * in a file. schemathesis comes pinned into `.venv/` by scripts/install-python-tools.sh, which
 * `npm test` runs first.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { LIVE_FEEDS } from '@agentroom/api';
import { SCOPES } from '@agentroom/kit/domain';
import { freePort, type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { signUp } from '../support/agent.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const st = `${root}.venv/bin/st`;

/** Examples per operation and phase: a couple of minutes at most in `npm test`, more in `npm run fuzz`. */
const maxExamples = Number(process.env.FUZZ_MAX_EXAMPLES ?? 20);
/** A time budget in seconds (`npm run fuzz` only): fuzzing and stateful testing repeat until it is spent. */
const maxTime = process.env.FUZZ_MAX_TIME;
/** `npm run fuzz` shows schemathesis's output as it runs; `npm test` prints it only on failure. */
const verbose = process.env.FUZZ_VERBOSE === '1';
/** The same seed every run, so a failure in `npm test` reproduces; `npm run fuzz` may draw its own. */
const seed = process.env.FUZZ_SEED ?? '20261123';

/**
 * Every check schemathesis has: its default when `--checks` is not given. Where one cannot know what
 * the server knows (a signed cursor, a device code, a reused idempotency key, whether a host
 * resolves), schemathesis.toml beside this file relaxes it for those operations alone, each with its
 * reason; `--checks all` on the command line would override those per-operation settings, so it is
 * passed only when FUZZ_CHECKS names checks of its own.
 */
const CHECKS = process.env.FUZZ_CHECKS;
/** Examples (the document's own), coverage (every boundary of every schema), fuzzing, and stateful (following the document's links). */
const PHASES = process.env.FUZZ_PHASES ?? 'examples,coverage,fuzzing,stateful';

/**
 * Left out, and why:
 * - every live feed (the rows of LIVE_FEEDS, below the document's `/v1`) answers 200 with a stream
 *   that never ends, so a client that waits for the whole body waits forever;
 *   e2e/live/live.test.ts, live-messages.test.ts and e2e/conversations/notifications.test.ts test
 *   them, and their problem answers go through the same pipeline as the operations fuzzed here.
 */
const EXCLUDED_PATHS = Object.values(LIVE_FEEDS).map((feed) => `/v1${feed.path}`);

interface Run {
  code: number | null;
  output: string;
  seconds: number;
}

function schemathesis(args: string[]): Promise<Run> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(st, args, { cwd: root, env: { ...process.env, NO_COLOR: '1', COLUMNS: '120' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const collect = (chunk: Buffer): void => {
      output += chunk.toString();
      if (verbose) process.stdout.write(chunk);
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output, seconds: (performance.now() - started) / 1000 }));
  });
}

/** The figures of schemathesis's summary in one line: operations tested, test cases, outcome. */
function summary(output: string): string {
  const tested = /Tested: (\d+)/.exec(output)?.[1] ?? '?';
  const cases = /Test cases:\s*\n\s*(.+)/.exec(output)?.[1]?.trim() ?? '?';
  return `${tested} operations, ${cases}`;
}

describe('schemathesis over /openapi.json', () => {
  let redis: LocalRedis;
  let app: Embedded;
  let token: string;

  beforeAll(async () => {
    if (!existsSync(st)) throw new Error(`${st} is missing: run bash scripts/install-python-tools.sh (npm test runs it)`);
    // Redis storage, as deployed: on memory storage /health answers 503 "degraded" by design.
    redis = await startRedisServer();
    // Generated requests spend quota like any other: high enough that no 429 hides an answer.
    app = await startEmbedded({
      LOG_LEVEL: 'silent',
      PORT: String(await freePort()),
      REDIS_URL: redis.url,
      QUOTA_PER_TOKEN: '100000000',
      QUOTA_PER_ADDRESS: '100000000',
      // So the webhook URL schemathesis.toml offers (loopback) can be registered, and followed by the stateful phase.
      WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true',
    });
    ({ token } = await signUp(app, [...SCOPES], 'fuzzer', { name: 'Fuzz', password: 'fuzz-password' }));
  });

  afterAll(async () => {
    await app?.stop();
    await redis?.stop();
  });

  it(
    'answers no 5xx, and every answer conforms to the document',
    async () => {
      const args = [
        '--config-file',
        fileURLToPath(new URL('schemathesis.toml', import.meta.url)),
        'run',
        `${app.urls.siteUrl}/openapi.json`,
        '--header',
        `Authorization: Bearer ${token}`,
        '--phases',
        PHASES,
        ...(CHECKS === undefined ? [] : ['--checks', CHECKS]),
        '--max-examples',
        String(maxExamples),
        '--seed',
        seed,
        // One worker: hypothesis's lambda descriptions call ast.parse, which CPython 3.11 does not
        // make safe across threads ("AST constructor recursion depth mismatch").
        '--workers',
        '1',
        '--request-timeout',
        '10',
        '--generation-database',
        'none',
        '--no-color',
        ...(maxTime === undefined ? [] : ['--max-time', maxTime]),
        ...EXCLUDED_PATHS.flatMap((path) => ['--exclude-path', path]),
      ];
      const run = await schemathesis(args);
      if (process.env.FUZZ_OUTPUT) await writeFile(process.env.FUZZ_OUTPUT, run.output);
      if (run.code !== 0 && !verbose) console.log(run.output);
      else console.log(`schemathesis: ${summary(run.output)} (${run.seconds.toFixed(0)} s)`);
      expect(run.code, 'schemathesis found failures: its report is printed above').toBe(0);
    },
    Number(process.env.FUZZ_TIMEOUT_MS ?? 240_000),
  );
});
