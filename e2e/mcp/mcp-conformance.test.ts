import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
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
const conformanceCli = createRequire(import.meta.url).resolve('@modelcontextprotocol/conformance/dist/index.js');
const baselineFile = fileURLToPath(new URL('./mcp-conformance-expected-failures.yml', import.meta.url));

/** The scenarios that apply to a server that offers tools and the room's MCP App (one resource, docs/decisions.md §48); each must pass. */
const APPLICABLE = ['server-initialize', 'ping', 'tools-list', 'resources-list', 'dns-rebinding-protection'];

interface Run {
  code: number | null;
  output: string;
}

function runConformance(args: string[], cwd: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    // The CLI may write results/ into its working directory: a temporary one, never the repository.
    const child = spawn(process.execPath, [conformanceCli, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'], timeout: 90_000 });
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

/** The scenario names of the `server:` list of the baseline file (a flat list of names). */
function baselineScenarios(yaml: string): string[] {
  return [...yaml.matchAll(/^\s+-\s+([a-z0-9-]+)\s*$/gm)].map((match) => match[1] ?? '');
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

describe('MCP conformance suite against /api/mcp', () => {
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

  it('passes every scenario that applies to a tools-only server, and fails only the listed ones', async () => {
    const expectedFailures = baselineScenarios(await readFile(baselineFile, 'utf8'));
    expect(expectedFailures.length).toBeGreaterThan(0);
    expect(expectedFailures.filter((name) => APPLICABLE.includes(name))).toEqual([]);

    // The whole active suite in one run: a regression in an applicable scenario, or a listed one
    // that starts to pass (a stale entry), exits 1.
    const run = await runConformance(['server', '--url', `${app.urls.apiUrl}/mcp`, '--expected-failures', baselineFile], workDir);
    expect(run.code, run.output).toBe(0);
    expect(run.output).toContain('Baseline check passed: all failures are expected.');
    expect(run.output).not.toMatch(/Unexpected failures|Stale baseline entries|Failed to run scenario/);

    const scenarios = summary(run.output);
    // Every scenario the suite ran is accounted for: it applies, or the baseline says why not.
    expect([...scenarios.keys()].sort()).toEqual([...APPLICABLE, ...expectedFailures].sort());
    for (const name of APPLICABLE) {
      const result = scenarios.get(name);
      expect(result, name).toMatchObject({ ok: true, failed: 0 });
      expect(result?.passed, name).toBeGreaterThan(0);
    }
    // Both checks: a foreign Host/Origin is refused, the deployment's own is accepted.
    expect(scenarios.get('dns-rebinding-protection')).toEqual({ ok: true, passed: 2, failed: 0 });
  }, 120_000);
});
