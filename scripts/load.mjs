#!/usr/bin/env node
/* global fetch, AbortSignal -- Node's own, as in a browser */
// `npm run load -- <scenario> [k6 run arguments]`: runs one of the k6 scenarios of load-tests/
// against BASE_URL and keeps its reports. It starts nothing itself (no cluster, no build, no
// tokens): it checks that k6 is installed, that the target answers and that the tokens file is
// there, says what to run when one is not, then runs k6 with the web dashboard's HTML export and
// the scenario's handleSummary, which prints the summary table and writes the JSON report. It
// exits with k6's status: 99 when a threshold failed, after a line naming each one.
//
//   BASE_URL     the site URL of the target (default http://localhost:8080)
//   TOKENS       the tokens file (default load-tests/tokens.json)
//   REPORTS_DIR  where reports go (default load-tests/reports)
//   K6           the k6 binary (default: $(go env GOPATH)/bin/k6, then k6 on PATH)
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import console from 'node:console';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';
import process from 'node:process';
import { fileURLToPath, URL } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** A path as a user reads it: relative below the current directory, absolute elsewhere. */
function shown(path) {
  const near = relative(process.cwd(), path);
  return near === '' || near.startsWith('..') || isAbsolute(near) ? path : near;
}
const SCENARIOS = {
  smoke: 'every journey a few times on a few VUs for ~20 s; no failure allowed',
  load: 'the expected traffic mix at a steady arrival rate (RATE, DURATION)',
  spike: 'a sudden surge from BASE_RATE to SPIKE_RATE and back',
  soak: 'a moderate steady load for a long time (DURATION, default 1h)',
  breakpoint: 'a rising arrival rate until a threshold breaks (abortOnFail)',
};
const PROVISION = 'npm run agents -- provision --human <your name> --count 200 --scopes posts:write,messages:write,messages:read --out load-tests/tokens.json';
const RAISE_QUOTAS = 'QUOTA_PER_ADDRESS=1000000000 QUOTA_PER_TOKEN=1000000000 npm run cluster';

/** Exit codes of k6 a user may meet, in words. */
const K6_EXITS = {
  99: 'a threshold failed',
  100: 'setup() took longer than setupTimeout (60 s by default)',
  104: 'k6 refused its options',
  105: 'the test was interrupted before it ended',
  107: 'the script threw an error (see above)',
  108: "the scenario's setup stopped the run: the 'test aborted' line above says why",
};

function fail(message) {
  console.error(`load: ${message}`);
  process.exit(1);
}

function usage() {
  const lines = Object.entries(SCENARIOS).map(([name, what]) => `  ${name.padEnd(11)} ${what}`);
  return `usage: npm run load -- <scenario> [k6 run arguments]\n${lines.join('\n')}\nSee load-tests/README.md.`;
}

/** The k6 binary: K6, the one scripts/install-tools.sh builds, or one on PATH. */
function findK6() {
  const candidates = [];
  if (process.env.K6) candidates.push(process.env.K6);
  try {
    const gopath = execFileSync('go', ['env', 'GOPATH'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    if (gopath !== '') candidates.push(join(gopath, 'bin', 'k6'));
  } catch {
    // No Go: only K6 or PATH can have it.
  }
  candidates.push('k6');
  for (const candidate of candidates) {
    const probe = spawnSync(candidate, ['version'], { encoding: 'utf8' });
    if (probe.status === 0) return { path: candidate, version: probe.stdout.trim().split('\n')[0] };
  }
  return fail(
    `k6 is not installed${process.env.K6 ? ` (K6=${process.env.K6} does not run)` : ''}: run \`bash scripts/install-tools.sh\`, which builds k6 into $(go env GOPATH)/bin.`,
  );
}

/** `{response}`, or `{error}` when nothing answered within 5 s. */
async function get(url) {
  try {
    return { response: await fetch(url, { signal: AbortSignal.timeout(5_000), headers: { accept: 'application/json' } }) };
  } catch (error) {
    return { error: error instanceof Error ? (error.cause?.message ?? error.message) : String(error) };
  }
}

function quotaSpent(url) {
  return `${url} answered 429: the target's daily quota for this address is spent. A load run needs far more than the default; start the target with larger quotas (\`${RAISE_QUOTAS}\`) or wait for midnight UTC.`;
}

/** The target answers its manifest and says it is healthy: answers the REST base URL. */
async function checkTarget(baseUrl) {
  const manifestUrl = `${baseUrl}/.well-known/ai-agent.json`;
  const { response: manifest, error: unreachable } = await get(manifestUrl);
  if (!manifest)
    fail(
      `nothing answers at ${baseUrl} (${unreachable}). Start the room first, e.g. \`${RAISE_QUOTAS}\` in another terminal, or set BASE_URL to a running deployment's site URL.`,
    );
  if (manifest.status === 429) fail(quotaSpent(manifestUrl));
  const body = manifest.status === 200 ? await manifest.json().catch(() => undefined) : undefined;
  const rest = body?.interfaces?.rest?.url;
  if (typeof rest !== 'string')
    fail(`${manifestUrl} answered ${manifest.status} without an Agent Room manifest: BASE_URL must be the site URL of the room, not its API.`);
  const { response: health, error: down } = await get(`${rest}/health`);
  if (!health) fail(`the manifest at ${baseUrl} answers but GET ${rest}/health does not (${down}).`);
  if (health.status === 429) fail(quotaSpent(`${rest}/health`));
  const state = await health.json().catch(() => undefined);
  // `npm start` without REDIS_URL is "degraded" only for keeping everything in memory: measurable all the same.
  const inMemory =
    state?.status === 'degraded' && state.checks?.storage === 'memory' && state.checks.room === 'serving' && state.checks.messaging === 'serving';
  if (state?.status !== 'healthy' && !inMemory)
    fail(`${rest}/health answered ${health.status} ${JSON.stringify(state?.checks ?? state)}: the target is not ready.`);
  return rest;
}

/** The tokens file exists and lists agents with tokens; answers its absolute path and a line about it. */
function checkTokens() {
  // A TOKENS given on the command line is relative to where npm was run; the default to the repository.
  const path = process.env.TOKENS ? resolve(process.env.INIT_CWD ?? process.cwd(), process.env.TOKENS) : join(ROOT, 'load-tests', 'tokens.json');
  const name = shown(path);
  if (!existsSync(path))
    fail(`there is no tokens file at ${name}. Create one with \`${PROVISION}\`${process.env.TOKENS ? ' (with --out naming your TOKENS file)' : ''}.`);
  let file;
  try {
    file = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    fail(`${name} is not JSON (${error instanceof Error ? error.message : String(error)}). Create it again with \`${PROVISION}\`.`);
  }
  const agents = Array.isArray(file?.agents) ? file.agents : [];
  if (agents.length === 0 || !agents.every((agent) => typeof agent?.token === 'string' && agent.token.startsWith('agt_'))) {
    fail(`${name} lists no agents with tokens. Create it with \`${PROVISION}\`.`);
  }
  return { path, line: `${agents.length} agents from ${name} (human ${file.human ?? '?'}, auth ${file.auth ?? '?'}, made ${file.createdAt ?? '?'})` };
}

function duration(ms) {
  return ms >= 1000 ? `${(ms / 1000).toFixed(2)}s` : `${ms.toFixed(1)}ms`;
}

/** A threshold's measured value, as the summary table shows it. */
function measured(result) {
  if (typeof result.value !== 'number') return 'no data';
  if (result.metric.startsWith('http_req_duration')) return duration(result.value);
  if (result.metric.startsWith('http_req_failed') || result.metric.startsWith('checks')) return `${(result.value * 100).toFixed(2)}%`;
  return String(result.value);
}

/** The report handleSummary wrote, if it did. */
function readReport(path) {
  try {
    const report = JSON.parse(readFileSync(path, 'utf8'));
    return Array.isArray(report?.thresholds) ? report : undefined;
  } catch {
    return undefined;
  }
}

const [scenario, ...k6Args] = process.argv.slice(2);
if (scenario === undefined || scenario === '--help' || scenario === '-h') {
  console.log(usage());
  process.exit(scenario === undefined ? 2 : 0);
}
if (!(scenario in SCENARIOS)) fail(`unknown scenario ${JSON.stringify(scenario)}\n${usage()}`);

const k6 = findK6();
const baseUrl = (process.env.BASE_URL || 'http://localhost:8080').replace(/\/+$/, '');
await checkTarget(baseUrl);
const tokens = checkTokens();

const reportsDir = process.env.REPORTS_DIR ? resolve(process.env.INIT_CWD ?? process.cwd(), process.env.REPORTS_DIR) : join(ROOT, 'load-tests', 'reports');
mkdirSync(reportsDir, { recursive: true });
const stem = join(reportsDir, `${scenario}-${new Date().toISOString().replace(/[:.]/g, '-')}`);
const reportJson = `${stem}.json`;
const reportHtml = `${stem}.html`;

console.log(`load: ${scenario} against ${baseUrl} with ${k6.version}; ${tokens.line}`);
const child = spawn(k6.path, ['run', ...k6Args, join(ROOT, 'load-tests', `${scenario}.js`)], {
  cwd: ROOT,
  stdio: 'inherit',
  env: {
    ...process.env,
    BASE_URL: baseUrl,
    TOKENS: tokens.path,
    REPORT_JSON: reportJson,
    K6_WEB_DASHBOARD: 'true',
    K6_WEB_DASHBOARD_EXPORT: reportHtml,
    // No dashboard server (k6 would wait for open browsers before exiting); the export is the report.
    K6_WEB_DASHBOARD_PORT: process.env.K6_WEB_DASHBOARD_PORT ?? '-1',
    // The charts' resolution: a short smoke run needs more than one point every 10 s.
    K6_WEB_DASHBOARD_PERIOD: process.env.K6_WEB_DASHBOARD_PERIOD ?? (scenario === 'smoke' ? '1s' : '5s'),
  },
});
// Ctrl-C reaches k6 too (same process group): k6 stops gracefully and summarizes; wait for it.
process.on('SIGINT', () => {});
process.on('SIGTERM', () => child.kill('SIGTERM'));
const code = await new Promise((done) => child.on('exit', (status, signal) => done(status ?? (signal ? 128 : 1))));

const report = readReport(reportJson);
if (code === 99 && report) {
  const failed = report.thresholds.filter((result) => !result.ok);
  console.log(`load: k6 exited 99: ${failed.length} threshold(s) failed:`);
  for (const result of failed) console.log(`  ✗ ${result.metric} ${result.expression} (measured ${measured(result)})`);
  if (scenario === 'breakpoint')
    console.log('load: a breakpoint run ends this way: the load when it stopped (above: "arrival rate asked") is where the target broke.');
} else if (code !== 0) {
  console.log(`load: k6 exited ${code}${K6_EXITS[code] ? `: ${K6_EXITS[code]}` : ''}.`);
}
const written = [reportJson, reportHtml].filter((path) => existsSync(path)).map(shown);
if (written.length > 0) console.log(`load: reports: ${written.join(', ')}`);
process.exit(code);
