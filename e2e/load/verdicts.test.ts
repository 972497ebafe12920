import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { goTool } from '../support/go-tools.js';
import { root } from '../support/processes.js';

const run = promisify(execFile);

/** What `k6 run --summary-export` writes of the checks: by name, and the rate of each `checks` series. */
const summary = z.object({
  root_group: z.object({ checks: z.record(z.string(), z.object({ passes: z.number(), fails: z.number() })) }),
  metrics: z.record(z.string(), z.object({ passes: z.number().optional(), fails: z.number().optional() })),
});

/**
 * One iteration that checks an answer by two rules. With STOP=yes the run stops while the second
 * rule is being decided: `exec.test.abort` throws the same interrupt into the VU's script as a run
 * stopping under it does (a breakpoint run crossing its abortOnFail threshold), deterministically.
 * RECORD=check hands the rules to k6's check() as functions; otherwise they go through `judge`.
 */
const SCRIPT = (verdicts: string): string => `
import { check } from 'k6';
import exec from 'k6/execution';
import { judge } from ${JSON.stringify(verdicts)};
export const options = { vus: 1, iterations: 1, thresholds: { 'checks{journey:read_room}': ['rate>=0'] } };
const rules = {
  'first page answers 200': () => true,
  'first page is a page of posts, newest first': () => {
    if (__ENV.STOP === 'yes') exec.test.abort('the run stops while this rule is decided');
    return __ENV.PAGE !== 'broken';
  },
};
export default function () {
  if (__ENV.RECORD === 'check') check(null, rules, { journey: 'read_room' });
  else console.log('judge answered ' + judge(null, rules, 'read_room'));
}
`;

/**
 * The load tests' checks (load-tests/lib/verdicts.js): k6 records a check function that the run
 * interrupts as a failed check, so a breakpoint run counted whole first pages as broken when it
 * stopped. The journeys decide every rule first and hand k6 the verdicts: an interrupted iteration
 * records nothing, and every finished one records exactly what its rules decided.
 */
describe('load tests: checks are decided before k6 records them', () => {
  let dir: string;
  let script: string;
  let k6: string;

  beforeAll(() => {
    k6 = goTool('k6');
    dir = mkdtempSync(join(tmpdir(), 'agent-room-verdicts-'));
    script = join(dir, 'verdicts.js');
    writeFileSync(script, SCRIPT(join(root, 'load-tests/lib/verdicts.js')));
  });

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Runs the script with `env`; k6's exit code, what the iteration logged, and the checks it recorded. */
  async function k6Run(
    env: Record<string, string>,
  ): Promise<{ code: number; log: string; checks: Record<string, { passes: number; fails: number }>; journey: { passes?: number; fails?: number } }> {
    const out = join(dir, `summary-${Object.values(env).join('-') || 'plain'}.json`);
    const result = await run(k6, ['run', '--quiet', '--no-color', `--summary-export=${out}`, script], { env: { ...process.env, ...env }, cwd: dir }).then(
      ({ stderr }) => ({ code: 0, stderr }),
      (error: { code?: number; stderr?: string }) => ({ code: error.code ?? -1, stderr: error.stderr ?? '' }),
    );
    const exported = summary.parse(JSON.parse(readFileSync(out, 'utf8')));
    return { code: result.code, log: result.stderr, checks: exported.root_group.checks, journey: exported.metrics['checks{journey:read_room}'] ?? {} };
  }

  it("k6's own check() records a rule the run interrupts as failed, though the answer was whole", async () => {
    const { code, checks } = await k6Run({ RECORD: 'check', STOP: 'yes' });
    // 108: the test was aborted by its script.
    expect(code).toBe(108);
    expect(checks['first page answers 200']).toMatchObject({ passes: 1, fails: 0 });
    // The cause of the breakpoint run's "bad" first pages: a failure nobody's answer made.
    expect(checks['first page is a page of posts, newest first']).toMatchObject({ passes: 0, fails: 1 });
  });

  it('judge records nothing of an iteration the run interrupts while it decides', async () => {
    const { code, checks, journey } = await k6Run({ RECORD: 'judge', STOP: 'yes' });
    expect(code).toBe(108);
    expect(checks).toEqual({});
    expect(journey).toMatchObject({ passes: 0, fails: 0 });
  });

  it('judge records each verdict of a finished iteration, tagged with its journey, and answers whether all held', async () => {
    const whole = await k6Run({ RECORD: 'judge' });
    expect(whole.code).toBe(0);
    expect(whole.log).toContain('judge answered true');
    expect(whole.checks['first page answers 200']).toMatchObject({ passes: 1, fails: 0 });
    expect(whole.checks['first page is a page of posts, newest first']).toMatchObject({ passes: 1, fails: 0 });
    // The checks{journey:…} series the scenarios' thresholds judge: a rate of passed checks is "passes".
    expect(whole.journey).toMatchObject({ passes: 2, fails: 0 });

    const broken = await k6Run({ RECORD: 'judge', PAGE: 'broken' });
    expect(broken.code).toBe(0);
    expect(broken.log).toContain('judge answered false');
    expect(broken.checks['first page answers 200']).toMatchObject({ passes: 1, fails: 0 });
    expect(broken.checks['first page is a page of posts, newest first']).toMatchObject({ passes: 0, fails: 1 });
    expect(broken.journey).toMatchObject({ passes: 1, fails: 1 });
  });

  it("no load-test script hands k6's check() a function: every check goes through judge", () => {
    const scripts: string[] = [];
    const walk = (folder: string): void => {
      for (const entry of readdirSync(folder, { withFileTypes: true })) {
        if (entry.isDirectory()) walk(join(folder, entry.name));
        else if (entry.name.endsWith('.js')) scripts.push(join(folder, entry.name));
      }
    };
    walk(join(root, 'load-tests'));
    const importers = scripts.filter((path) => /import\s*\{[^}]*\bcheck\b[^}]*\}\s*from\s*'k6'/.test(readFileSync(path, 'utf8')));
    expect(importers.map((path) => relative(root, path))).toEqual(['load-tests/lib/verdicts.js']);
    // And the journeys do judge their answers.
    expect(readFileSync(join(root, 'load-tests/lib/journeys.js'), 'utf8')).toMatch(/\bjudge\(/);
  });
});
