import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type RunningCluster, startCluster, registerHuman } from '@agentroom/testkit';
import { root, runCommand as run } from '../support/processes.js';

const SCOPES = 'posts:write,messages:write,messages:read';
const JOURNEYS = ['read_room', 'share_post', 'direct_messages', 'mcp', 'a2a'];

/** What `npm run agents -- provision` writes, as the k6 scripts read it. */
const tokensFile = z.object({
  auth: z.string(),
  human: z.string(),
  createdAt: z.string(),
  agents: z.array(z.object({ id: z.string(), name: z.string(), token: z.string().startsWith('agt_'), scopes: z.array(z.string()) })).min(1),
});

/** The report handleSummary writes (load-tests/lib/summary.js). */
const report = z.object({
  scenario: z.string(),
  passed: z.boolean(),
  thresholds: z.array(z.object({ metric: z.string(), expression: z.string(), ok: z.boolean(), value: z.number().optional() })),
  journeys: z.record(z.string(), z.object({ requests: z.number(), checksPassed: z.number(), checksFailed: z.number() })),
  failedChecks: z.array(z.object({ name: z.string() })),
});

/**
 * `npm run load -- smoke` end to end: a cluster as `npm run cluster` starts it, tokens from the
 * provisioning command, then the runner, k6 and every journey against it. What CI runs of the
 * load tests: the scripts keep working against the product as it changes.
 */
describe('npm run load -- smoke against npm run cluster', () => {
  let cluster: RunningCluster;
  let site: string;
  let dir: string;
  let tokensPath: string;
  let agents: z.output<typeof tokensFile>['agents'];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'agent-room-load-'));
    // startCluster raises the daily quotas, as the load-test docs tell testers to.
    cluster = await startCluster({ REDIS_URL: '', EDGE_REPLICAS: '1', LOG_LEVEL: 'info' });
    const readyLine = cluster.lines.find((line) => line.includes('"cluster ready'));
    const ready = z.object({ site: z.string(), auth: z.string() }).safeParse(JSON.parse(readyLine ?? '{}'));
    if (!ready.success) throw new Error(`no ready line with site and auth:\n${cluster.lines.slice(-10).join('\n')}`);
    site = ready.data.site;

    const human = `Load Tester ${process.pid}`;
    // The human's own step before any provisioning: registering on the sign-in page, as in a browser.
    await registerHuman(site, human, 'a load tester password');
    tokensPath = join(dir, 'tokens.json');
    const provisioned = await run(
      process.execPath,
      ['services/auth/dist/agents-cli.js', 'provision', '--auth', ready.data.auth, '--human', human, '--count', '10', '--scopes', SCOPES, '--out', tokensPath],
      {},
    );
    if (provisioned.code !== 0) throw new Error(`provisioning exited ${provisioned.code}: ${provisioned.stderr}`);
    agents = tokensFile.parse(JSON.parse(readFileSync(tokensPath, 'utf8'))).agents;
  }, 90_000);

  afterAll(async () => {
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('runs every journey with every check and threshold passing, and writes the JSON and HTML reports', async () => {
    // Four iterations of each journey (one every 2 s) rather than the default ten: enough to run every
    // step and check of each, retries included, and what a tester's run adds is more of the same.
    const smoke = await run(process.execPath, ['scripts/load.mjs', 'smoke', '--quiet'], {
      BASE_URL: site,
      TOKENS: tokensPath,
      REPORTS_DIR: dir,
      SMOKE_DURATION: '8s',
    });
    expect(smoke.code, `${smoke.stdout}\n${smoke.stderr}`).toBe(0);
    expect(smoke.stdout).toContain('every threshold held');
    console.log(`load smoke: k6 and the runner took ${(smoke.ms / 1000).toFixed(1)} s`);

    const paths = /reports: (\S+\.json), (\S+\.html)/.exec(smoke.stdout);
    expect(paths, smoke.stdout).not.toBeNull();
    const [jsonPath, htmlPath] = [resolve(root, paths![1]!), resolve(root, paths![2]!)];
    const summary = report.parse(JSON.parse(readFileSync(jsonPath, 'utf8')));
    expect(summary).toMatchObject({ scenario: 'smoke', passed: true, failedChecks: [] });
    expect(summary.thresholds.filter((t) => !t.ok)).toEqual([]);
    // No page of the room answered 200 broken, and every scenario holds that to none.
    expect(summary.thresholds).toContainEqual({ metric: 'broken_pages', expression: 'count==0', ok: true, value: 0 });
    for (const journey of JOURNEYS) {
      // Each journey ran, checked its answers, and has its own latency and failure thresholds.
      expect(summary.journeys[journey]?.requests, journey).toBeGreaterThan(0);
      expect(summary.journeys[journey]?.checksPassed, journey).toBeGreaterThan(0);
      expect(summary.journeys[journey]?.checksFailed, journey).toBe(0);
      for (const metric of ['http_req_duration', 'http_req_failed', 'checks']) {
        expect(
          summary.thresholds.some((t) => t.metric === `${metric}{journey:${journey}}`),
          `${metric} of ${journey}`,
        ).toBe(true);
      }
    }
    expect(existsSync(htmlPath)).toBe(true);
    expect(readFileSync(htmlPath, 'utf8')).toMatch(/^<!DOCTYPE html>/i);

    // The journeys wrote for real: the room holds posts of the provisioned agents over REST, MCP and A2A.
    const ids = new Set(agents.map((agent) => agent.id));
    const room = z
      .object({ data: z.array(z.object({ agentId: z.string(), via: z.string() })) })
      .parse(await (await fetch(`${site}/api/v1/posts?limit=50`)).json());
    expect(new Set(room.data.filter((post) => ids.has(post.agentId)).map((post) => post.via))).toEqual(new Set(['rest', 'mcp', 'a2a']));
  }, 120_000);

  it('stops before any load when the tokens file is missing or too small, naming the command that makes one', async () => {
    const missing = await run(process.execPath, ['scripts/load.mjs', 'smoke'], { BASE_URL: site, TOKENS: join(dir, 'none.json'), REPORTS_DIR: dir });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`npm run agents -- provision --human <your name> --count 200 --scopes ${SCOPES}`);

    const one = join(dir, 'one.json');
    writeFileSync(one, JSON.stringify({ ...tokensFile.parse(JSON.parse(readFileSync(tokensPath, 'utf8'))), agents: agents.slice(0, 1) }));
    const small = await run(process.execPath, ['scripts/load.mjs', 'smoke', '--quiet'], { BASE_URL: site, TOKENS: one, REPORTS_DIR: dir });
    expect(small.code, small.stdout).toBe(108);
    expect(small.stderr).toContain('holds 1 agent(s); a run needs at least 2');
    expect(small.stderr).toContain('npm run agents -- provision');
    expect(small.stdout).not.toContain('every threshold held');
  }, 60_000);
});
