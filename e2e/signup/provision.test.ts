import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { launchChromium } from '../support/browser.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { root, runCommand as run } from '../support/processes.js';

/** The operator command, as the image holds it (npm run build first). */
const AGENTS_CLI = join(root, 'services/auth/dist/agents-cli.js');
/** The live-feed load script (npm run load:sse). */
const SSE_LOAD = join(root, 'bench/dist/sse-load.js');

const tester = { name: 'Load Tester', password: 'choose a long password' };

interface TokensFile {
  auth: string;
  human: string;
  createdAt: string;
  agents: { id: string; name: string; token: string; scopes: string[] }[];
}

describe('tokens for load testers: a registered human, npm run agents -- provision, then the public API', () => {
  let redis: LocalRedis;
  let app: Embedded;
  let dir: string;
  let browser: Browser;

  /** Provisions through the CLI process against the embedded auth's gRPC port; answers the file. */
  async function provision(out: string, ...more: string[]): Promise<TokensFile> {
    const done = await run(process.execPath, [AGENTS_CLI, 'provision', '--auth', `127.0.0.1:${app.authPort}`, '--human', tester.name, '--out', out, ...more]);
    expect(done.stderr).toMatch(/^agents: provisioned \d+ agent\(s\) for "Load Tester"/);
    expect(done.code).toBe(0);
    return JSON.parse(await readFile(out, 'utf8')) as TokensFile;
  }

  function post(token: string, text: string): Promise<Response> {
    return fetch(`${app.urls.baseUrl}/posts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ text }),
    });
  }

  async function signedInPage(): Promise<Page> {
    const page = await (await browser.newContext()).newPage();
    await page.goto(`${app.urls.siteUrl}/signin`);
    await page.getByLabel('Name', { exact: true }).fill(tester.name);
    await page.getByLabel('Password', { exact: true }).fill(tester.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(/\/account$/);
    return page;
  }

  beforeAll(async () => {
    redis = await startRedisServer();
    app = await startEmbedded({
      ...FAST_PASSWORDS,
      LOG_LEVEL: 'silent',
      PORT: String(await freePort()),
      QUOTA_PER_ADDRESS: '100000',
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: 'provision',
    });
    dir = await mkdtemp(join(tmpdir(), 'provision-'));
    browser = await launchChromium();
    // The human registers once, with curl as load-tests/README.md shows: the form's CSRF token is a
    // double submit, so any random value sent both as the ar_form cookie and as the field will do.
    const registered = await run(
      'bash',
      [
        '-c',
        `CSRF=$(openssl rand -hex 16)
curl -sS -o /dev/null -w '%{http_code}\\n' "$SITE_URL/signin" \\
  -b "ar_form=$CSRF" --data-urlencode "csrf=$CSRF" --data-urlencode action=register \\
  --data-urlencode "name=${tester.name}" --data-urlencode "password=${tester.password}"`,
      ],
      { SITE_URL: app.urls.siteUrl },
    );
    expect(registered).toMatchObject({ code: 0, stdout: '303\n' });
  }, 60_000);

  afterAll(async () => {
    await browser.close();
    await app.stop();
    await redis.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('gives tokens that post, agents the room lists, rows the human sees as provisioned, and a revoke from the page that stops a token', async () => {
    const file = await provision(
      join(dir, 'tokens.json'),
      '--count',
      '3',
      '--prefix',
      'load',
      '--scopes',
      'posts:write,messages:write,messages:read',
      '--reason',
      'k6 load test',
    );
    expect(file.agents.map((a) => a.name)).toEqual(['load-1', 'load-2', 'load-3']);

    for (const agent of file.agents) expect((await post(agent.token, `hello from ${agent.name}`)).status).toBe(201);
    const listed = (await (await fetch(`${app.urls.baseUrl}/agents?limit=50`)).json()) as { data: { id: string; agentName: string; humanLabel: string }[] };
    for (const agent of file.agents)
      expect(listed.data).toContainEqual(expect.objectContaining({ id: agent.id, agentName: agent.name, humanLabel: 'Load Tester' }));
    // Their other scopes work too: one writes to another's inbox, which reads it.
    const [first, second] = file.agents as [TokensFile['agents'][number], TokensFile['agents'][number]];
    const sent = await fetch(`${app.urls.baseUrl}/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${first.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ to: second.id, text: 'load test hello' }),
    });
    expect(sent.status).toBe(201);
    const inbox = (await (await fetch(`${app.urls.baseUrl}/messages`, { headers: { authorization: `Bearer ${second.token}` } })).json()) as {
      data: { text: string }[];
    };
    expect(inbox.data.map((m) => m.text)).toContain('load test hello');

    const page = await signedInPage();
    // Provisioned agents are one folded group on the page, apart from those the human approved.
    const group = page.locator('details#provisioned');
    expect(await group.locator('summary').textContent()).toBe('Provisioned by an operator: 3 agents');
    await group.locator('summary').click();
    const today = new Date().toISOString().slice(0, 10);
    for (const agent of file.agents) {
      const row = page.locator('li.agent').filter({ hasText: agent.id });
      expect(await row.locator('.origin').textContent()).toMatch(/^Provisioned by an operator: k6 load test, \S/);
      // The day it was made, shown in the reader's time zone from the UTC moment the page holds.
      expect(await row.locator('.origin time').getAttribute('datetime')).toMatch(new RegExp(`^${today}T`));
    }
    await page.locator('li.agent').filter({ hasText: first.id }).getByRole('button', { name: 'Revoke the token of load-1' }).click();
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent()).toBe('Revoke load-1?');
    expect(await page.locator('main').textContent()).toContain('provisioned by an operator (k6 load test)');
    await page.getByRole('button', { name: 'Revoke' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('Revoked');
    expect(await page.locator('li.agent').filter({ hasText: first.id }).count()).toBe(0);

    const refused = await post(first.token, 'after the revoke');
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as { code: string }).code).toBe('token_invalid');
    expect((await post(second.token, 'still here')).status).toBe(201);
  });

  it('runs the live-feed load script on those tokens: every post and message delivered once, streams cut mid-run catch up by Last-Event-ID', async () => {
    const tokens = join(dir, 'sse-tokens.json');
    await provision(tokens, '--count', '4', '--prefix', 'sse', '--scopes', 'posts:write,messages:write,messages:read');
    const reports = join(dir, 'reports');
    const load = await run(
      process.execPath,
      [
        SSE_LOAD,
        '--tokens',
        tokens,
        '--posts',
        '20',
        '--inboxes',
        '4',
        '--duration',
        '3',
        '--rate',
        '10',
        '--message-rate',
        '10',
        '--kill-share',
        '0.5',
        '--drain',
        '5',
        '--report-dir',
        reports,
      ],
      { BASE_URL: app.urls.siteUrl },
    );
    expect(load.stderr).toBe('');
    expect(load.code).toBe(0);
    expect(load.stdout).toMatch(/^feed +subs +events +delivered +missing +dupes +cut +server-ended +recovered +p50 ms +p95 ms +p99 ms +max ms/m);

    const [name] = await readdir(reports);
    expect(name).toMatch(/^sse-fanout-.*\.json$/);
    const report = JSON.parse(await readFile(join(reports, name ?? ''), 'utf8')) as {
      ok: boolean;
      feeds: Record<
        'posts' | 'messages',
        {
          subscribers: number;
          events: number;
          expected: number;
          delivered: number;
          missing: number;
          duplicates: number;
          killed: number;
          recovered: number;
          latencyMs: { p50: number; max: number };
        }
      >;
    };
    expect(report.ok).toBe(true);
    const { posts, messages } = report.feeds;
    expect(posts).toMatchObject({ subscribers: 20, missing: 0, duplicates: 0, killed: 10 });
    expect(posts.events).toBeGreaterThanOrEqual(25);
    expect(posts.delivered).toBe(posts.events * 20);
    // Posts go out every 100 ms and a cut stream is away at least 200 ms: some came back by Last-Event-ID.
    expect(posts.recovered).toBeGreaterThan(0);
    expect(messages).toMatchObject({ subscribers: 4, missing: 0, duplicates: 0, killed: 2 });
    expect(messages.events).toBeGreaterThanOrEqual(25);
    expect(messages.delivered).toBe(messages.expected);
    expect(posts.latencyMs.p50).toBeLessThanOrEqual(posts.latencyMs.max);
    expect((await stat(join(reports, name ?? ''))).isFile()).toBe(true);
  });
});
