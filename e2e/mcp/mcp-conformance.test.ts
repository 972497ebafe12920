import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stripVTControlCharacters } from 'node:util';
import { freePort } from '@agentroom/kit/local';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';

/** The suite's own CLI, run with the Node that runs the tests. */
const require = createRequire(import.meta.url);
const conformanceCli = require.resolve('@modelcontextprotocol/conformance/dist/index.js');
const conformanceVersion = (require('@modelcontextprotocol/conformance/package.json') as { version: string }).version;

/** The suite's release these baselines were written against (docs/mcp.md, "Protocol revisions"). */
const SUITE_VERSION = '0.2.0-alpha.12';

interface Revision {
  /** The expected failures: whole scenarios, or one check of a scenario as `scenario:check-id`. */
  baseline: string;
  /** The scenarios of the revision's requirement set that apply to the room's server (its tools, resources and prompts): each passes whole. */
  applicable: string[];
  /** Checks of a scenario partly baselined that must pass (the ones that test what we serve). */
  checks: Record<string, string[]>;
}

/** Each revision the suite knows, run at its own wire (`--requirements`): 2025-11-25 with initialize, 2026-07-28 per request. */
const REVISIONS: Record<'2025-11-25' | '2026-07-28', Revision> = {
  '2025-11-25': {
    baseline: fileURLToPath(new URL('./mcp-conformance-expected-failures.yml', import.meta.url)),
    applicable: [
      'server-initialize',
      'ping',
      'tools-list',
      'resources-list',
      'prompts-list',
      'dns-rebinding-protection',
      'server-sse-multiple-streams',
      'server-session-lifecycle',
      'server-sse-polling',
    ],
    checks: {},
  },
  '2026-07-28': {
    baseline: fileURLToPath(new URL('./mcp-conformance-expected-failures-2026-07-28.yml', import.meta.url)),
    applicable: [
      'tools-list',
      'resources-list',
      'prompts-list',
      'server-sse-multiple-streams',
      'sep-2164-resource-not-found',
      'caching',
      'dns-rebinding-protection',
      'input-required-result-unsupported-methods',
      'input-required-result-validate-input',
      'http-header-validation',
      // Not scored (the tasks extension): with no task ever created it has nothing to check, and passes.
      'tasks-status-notifications',
    ],
    checks: {
      'server-stateless': [
        'sep-2575-server-implements-discover',
        'sep-2575-server-identifies-in-result-meta',
        'sep-2575-discover-capabilities-match-handlers',
        'sep-2575-server-unsupported-version-error',
        'sep-2575-http-server-unsupported-version-400',
        'sep-2575-http-server-header-mismatch-400',
        'sep-2575-request-meta-invalid-missing-meta',
        'sep-2575-http-server-method-not-found-404-initialize',
        'sep-2575-http-server-error-jsonrpc-id',
      ],
    },
  },
};

interface Run {
  code: number | null;
  output: string;
}

function runConformance(args: string[], cwd: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    // The CLI may write results/ into its working directory: a temporary one, never the repository.
    const child = spawn(process.execPath, [conformanceCli, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'], timeout: 240_000 });
    let output = '';
    const collect = (chunk: Buffer): void => {
      output += chunk.toString('utf8');
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, output: stripVTControlCharacters(output) }));
  });
}

/** The entries of the `server:` list of a baseline file: whole scenarios, and checks by scenario. */
function baselineEntries(yaml: string): { scenarios: string[]; checks: Map<string, string[]> } {
  const scenarios: string[] = [];
  const checks = new Map<string, string[]>();
  for (const [, entry = ''] of yaml.matchAll(/^\s+-\s+([a-z0-9:-]+)\s*$/gm)) {
    const [scenario = '', check] = entry.split(':');
    if (check === undefined) scenarios.push(scenario);
    else checks.set(scenario, [...(checks.get(scenario) ?? []), check]);
  }
  return { scenarios, checks };
}

interface ScenarioSummary {
  ok: boolean;
  passed: number;
  failed: number;
}

/** Reads the CLI's `=== SUMMARY ===` lines: `✓ ping: 1 passed, 0 failed`. */
function summary(output: string): Map<string, ScenarioSummary> {
  const lines = new Map<string, ScenarioSummary>();
  const section = output.slice(output.indexOf('=== SUMMARY ==='));
  for (const match of section.matchAll(/^([✓✗]) ([a-z0-9-]+): (\d+) passed, (\d+) failed$/gm)) {
    lines.set(match[2] ?? '', { ok: match[1] === '✓', passed: Number(match[3]), failed: Number(match[4]) });
  }
  return lines;
}

/** Each check's status in the results the CLI saved for a scenario (`-o`: one `server-<scenario>-<time>/checks.json`). */
async function checkStatuses(outputDir: string, scenario: string): Promise<Map<string, string>> {
  const folder = (await readdir(outputDir)).find((name) => name.startsWith(`server-${scenario}-2`));
  if (folder === undefined) throw new Error(`no saved results for ${scenario}`);
  const checks = JSON.parse(await readFile(join(outputDir, folder, 'checks.json'), 'utf8')) as { id: string; status: string }[];
  return new Map(checks.map((check) => [check.id, check.status]));
}

describe(`MCP conformance suite ${SUITE_VERSION} against /api/mcp, in both revisions`, () => {
  let app: Embedded;
  let workDir: string;

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
    workDir = await mkdtemp(join(tmpdir(), 'agentroom-conformance-'));
  });

  afterAll(async () => {
    await app.stop();
    await rm(workDir, { recursive: true, force: true });
  });

  it(`runs the suite release the baselines name (${SUITE_VERSION})`, () => {
    expect(conformanceVersion).toBe(SUITE_VERSION);
  });

  for (const [revision, { baseline, applicable, checks }] of Object.entries(REVISIONS)) {
    it(`passes every ${revision} scenario that applies to the room's server, and fails only the listed ones`, async () => {
      const expected = baselineEntries(await readFile(baseline, 'utf8'));
      expect(expected.scenarios.length).toBeGreaterThan(0);
      expect(expected.scenarios.filter((name) => applicable.includes(name))).toEqual([]);
      for (const [scenario, names] of Object.entries(checks)) expect(names.filter((name) => expected.checks.get(scenario)?.includes(name))).toEqual([]);

      // The revision's whole requirement set in one run, at its own wire: a regression in an
      // applicable scenario or check, or a listed one that starts to pass (a stale entry), exits 1.
      const outputDir = join(workDir, revision);
      const run = await runConformance(
        ['server', '--url', `${app.urls.apiUrl}/mcp`, '--requirements', revision, '--expected-failures', baseline, '-o', outputDir],
        workDir,
      );
      expect(run.code, run.output).toBe(0);
      expect(run.output).toContain('Baseline check passed: all failures are expected.');
      expect(run.output).not.toMatch(/Unexpected failures|Stale baseline entries|Failed to run scenario/);

      const scenarios = summary(run.output);
      // Every scenario the suite ran is accounted for: it applies, or the baseline says why not (whole or check by check).
      expect([...scenarios.keys()].sort()).toEqual([...applicable, ...expected.scenarios, ...expected.checks.keys()].sort());
      for (const name of applicable) expect(scenarios.get(name), name).toMatchObject({ ok: true, failed: 0 });
      // Both checks: a foreign Host/Origin is refused, the deployment's own is accepted.
      expect(scenarios.get('dns-rebinding-protection')).toEqual({ ok: true, passed: 2, failed: 0 });
      for (const [scenario, names] of Object.entries(checks)) {
        const statuses = await checkStatuses(outputDir, scenario);
        for (const name of names) expect(statuses.get(name), `${scenario}:${name}`).toBe('SUCCESS');
      }
    }, 300_000);
  }
});
