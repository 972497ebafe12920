import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '@agentroom/kit/local';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MINIMUM_NODE } from '@agentroom/gateway/node-version';

/**
 * What a newcomer sees when `npm start` (or `npm run cluster`) cannot start: the built launchers
 * run as real processes (`npm test` builds first), and each failure a person can fix must be ONE
 * line that names the problem and the fix, with a non-zero exit and no stack trace.
 */
const root = fileURLToPath(new URL('../../', import.meta.url));

/** A Node.js that says it is 22.22.0, to see what the launchers do on one older than "engines". */
const OLD_NODE = ['--import', 'data:text/javascript,Object.defineProperty(process.versions,"node",{value:"22.22.0"})'];

interface Finished {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Every non-empty line, stdout's then stderr's. */
  lines: string[];
}

/** The environment of a launcher under test: nothing inherited decides storage, port or log format. */
function cleanEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const deciding = new Set([
    'REDIS_URL',
    'DATABASE_URL',
    'DATABASE_READ_URL',
    'DATA_DIR',
    'LOG_FORMAT',
    'PORT',
    'ADMIN_PORT',
    'SITE_URL',
    'API_URL',
    'EDGE_REPLICAS',
  ]);
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !deciding.has(name)));
  return { ...inherited, LOG_LEVEL: 'info', SHUTDOWN_GRACE_MS: '500', ...env };
}

/** Runs `node <args>` from the repository root until it exits (killed after `timeoutMs`). */
async function run(args: string[], env: Record<string, string>, timeoutMs = 20_000): Promise<Finished> {
  const child = spawn(process.execPath, args, { cwd: root, env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((resolve) => child.once('close', (exitCode) => resolve(exitCode)));
  clearTimeout(timer);
  const lines = [...stdout.split('\n'), ...stderr.split('\n')].filter((line) => line.trim() !== '');
  return { code, stdout, stderr, lines };
}

/** The failure is told once, in one line, without a stack trace; returns that line. */
function oneLine(result: Finished): string {
  expect(result.code, `exit code; output:\n${result.lines.join('\n')}`).not.toBe(0);
  expect(result.code).not.toBeNull(); // exited by itself, not killed by our timeout
  expect(result.lines, `exactly one line:\n${result.lines.join('\n')}`).toHaveLength(1);
  const line = result.lines[0] ?? '';
  expect(line).not.toMatch(/^\s+at /m);
  expect(line).not.toMatch(/^\{/); // not a JSON log record
  return line;
}

/** Something else listening on a port of this machine. */
async function occupy(): Promise<{ port: number; server: Server }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const address = server.address();
  return { port: typeof address === 'object' && address ? address.port : 0, server };
}

async function closeServer(server: Server): Promise<void> {
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

describe('npm start when it cannot start', () => {
  let busy: { port: number; server: Server };
  beforeAll(async () => {
    busy = await occupy();
  });
  afterAll(async () => {
    await closeServer(busy.server);
  });

  it('a busy PORT: one line naming the port and the fix, exit 1, before anything starts', async () => {
    const result = await run(['launcher/dist/start.js'], { PORT: String(busy.port) });
    const line = oneLine(result);
    expect(result.code).toBe(1);
    expect(line).toContain(`port ${busy.port} is in use`);
    expect(line).toContain('stop the other process or set PORT=');
    expect(result.stdout).toBe(''); // no service had started, so none logged
  });

  it('a malformed REDIS_URL: one line naming the variable and a valid form, never its password', async () => {
    const result = await run(['launcher/dist/start.js'], { PORT: String(await freePort()), REDIS_URL: 'redis://:s3cret@127.0.0.1:notaport' });
    const line = oneLine(result);
    expect(line).toContain('REDIS_URL=');
    expect(line).toContain('redis://127.0.0.1:6379');
    expect(line).not.toContain('s3cret');
  });

  it('a REDIS_URL where nothing listens: one line saying so and what to do', async () => {
    const closed = await freePort();
    const result = await run(['launcher/dist/start.js'], { PORT: String(await freePort()), REDIS_URL: `redis://127.0.0.1:${closed}` });
    const line = oneLine(result);
    expect(result.code).toBe(1);
    expect(line).toContain(`nothing listens at 127.0.0.1:${closed}`);
    expect(line).toContain('unset REDIS_URL for in-memory storage');
  });

  it('a DATABASE_URL where nothing listens: one line saying so and what to do, never its password', async () => {
    const closed = await freePort();
    const result = await run(['launcher/dist/start.js'], {
      PORT: String(await freePort()),
      DATABASE_URL: `postgres://agentroom:s3cret@127.0.0.1:${closed}/agentroom`,
    });
    const line = oneLine(result);
    expect(result.code).toBe(1);
    expect(line).toMatch(new RegExp(`^Agent Room could not start: PostgreSQL at .*127\\.0\\.0\\.1:${closed}.* is unreachable`));
    expect(line).toContain('DATABASE_URL');
    expect(result.stdout + result.stderr).not.toContain('s3cret');
  });

  describe('a Redis that refuses our password', () => {
    let redis: ChildProcess;
    let redisPort: number;
    let dir: string;
    beforeAll(async () => {
      redisPort = await freePort();
      dir = mkdtempSync(join(tmpdir(), 'agentroom-startup-'));
      redis = spawn(
        'redis-server',
        ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--requirepass', 'right-one'],
        { stdio: 'ignore' },
      );
      const deadline = Date.now() + 10_000;
      for (;;) {
        const accepted = await new Promise<boolean>((resolve) => {
          const socket = connect(redisPort, '127.0.0.1', () => {
            socket.destroy();
            resolve(true);
          });
          socket.once('error', () => resolve(false));
        });
        if (accepted) break;
        if (Date.now() > deadline) throw new Error('redis-server did not start (is it installed? bash scripts/install-test-deps.sh)');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    });
    afterAll(() => {
      redis.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    });

    it('one line saying the credentials were refused, never the password', async () => {
      const result = await run(['launcher/dist/start.js'], { PORT: String(await freePort()), REDIS_URL: `redis://:wrong-one@127.0.0.1:${redisPort}` });
      const line = oneLine(result);
      expect(line).toContain('refused the credentials in REDIS_URL');
      expect(line).not.toContain('wrong-one');
    });
  });

  it('a Node.js older than package.json "engines": one line from the launcher and from the build script', async () => {
    const engines = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { engines: { node: string } }).engines.node;
    // The launcher's minimum is package.json's: `>=24.11` is 24.11.0.
    const [major = '0', minor = '0', patch = '0'] = engines.replace(/^>=\s*/, '').split('.');
    expect(`${major}.${minor}.${patch}`).toBe(MINIMUM_NODE);
    for (const script of ['launcher/dist/start.js', 'launcher/dist/cluster.js', 'scripts/build.mjs']) {
      const line = oneLine(await run([...OLD_NODE, script], { PORT: String(busy.port) }));
      expect(line).toMatch(/needs Node\.js 24\.11(\.0)? or newer/);
      expect(line).toContain('this is Node.js 22.22.0');
      // What to do, in the same line: the project's own installer of Node.js 24.
      expect(line).toContain('export PATH="$(bash scripts/install-node.sh):$PATH"');
    }
  });
});

describe('npm run cluster when it cannot start', () => {
  it('a busy PORT fails before anything claims to be ready', async () => {
    const busy = await occupy();
    try {
      const result = await run(['launcher/dist/cluster.js'], { PORT: String(busy.port), REDIS_URL: '' }, 60_000);
      const line = oneLine(result);
      expect(line).not.toContain('cluster ready');
      expect(line).toContain(`port ${busy.port} is in use`);
      expect(line).toContain('PORT=');
    } finally {
      await closeServer(busy.server);
    }
  });

  it('a REDIS_URL where nothing listens: one line before any process starts', async () => {
    const closed = await freePort();
    const result = await run(['launcher/dist/cluster.js'], { PORT: String(await freePort()), REDIS_URL: `redis://127.0.0.1:${closed}` }, 60_000);
    const line = oneLine(result);
    expect(line).toContain(`nothing listens at 127.0.0.1:${closed}`);
  });

  it('a DATABASE_URL where nothing listens: one line before any process starts', async () => {
    const closed = await freePort();
    const result = await run(
      ['launcher/dist/cluster.js'],
      { PORT: String(await freePort()), DATABASE_URL: `postgres://127.0.0.1:${closed}/agentroom` },
      60_000,
    );
    const line = oneLine(result);
    expect(line).toMatch(new RegExp(`^cluster could not start: PostgreSQL at .*127\\.0\\.0\\.1:${closed}.* is unreachable`));
    expect(result.stdout).not.toContain('cluster ready');
  });

  it('the router process on a busy PORT says so in one line (a port taken after the cluster looked)', async () => {
    const busy = await occupy();
    try {
      const result = await run(['gateway/dist/main.js'], { PORT: String(busy.port), EDGE_URLS: 'http://127.0.0.1:1', AUTH_URLS: 'http://127.0.0.1:1' });
      expect(oneLine(result)).toContain(`router could not start: port ${busy.port} is in use`);
    } finally {
      await closeServer(busy.server);
    }
  });
});

describe('npm start when it runs', () => {
  /**
   * Runs `npm start`'s launcher until its block is out (stdout in a terminal, stderr with JSON
   * logs), hands it to `use` while it runs, then stops it.
   */
  async function startOnce(
    env: Record<string, string>,
    args: string[] = [],
    use?: (site: string, stdout: string) => Promise<void>,
  ): Promise<{ port: number; stdout: string; stderr: string }> {
    const port = await freePort();
    const child = spawn(process.execPath, ['launcher/dist/start.js', ...args], {
      cwd: root,
      env: cleanEnv({ PORT: String(port), ...env }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    try {
      const deadline = Date.now() + 20_000;
      while (!`${stdout}${stderr}`.includes('The log follows.')) {
        if (child.exitCode !== null) throw new Error(`exited with ${child.exitCode}:\n${stdout}${stderr}`);
        if (Date.now() > deadline) throw new Error(`no block in time:\n${stdout}${stderr}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      await use?.(`http://127.0.0.1:${port}`, stdout);
      return { port, stdout, stderr };
    } finally {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
  }

  it('in a terminal: one plain block with the room, the portal, the MCP URL and what memory storage means, and no start-up lines above it', async () => {
    const { port, stdout } = await startOnce({ LOG_FORMAT: 'pretty' });
    const site = `http://localhost:${port}`;
    const before = stdout.slice(0, stdout.indexOf('Agent Room is running.'));
    expect(before.trim(), 'nothing above the block').toBe('');
    expect(stdout).toContain(`The room          ${site}/`);
    expect(stdout).toContain(`Developer portal  ${site}/developers`);
    expect(stdout).toMatch(new RegExp(`MCP server URL {4}${site}/api/mcp {3}\\(paste it into`));
    expect(stdout).toContain('Storage: in memory. Humans, agents, tokens and posts go when this process stops');
  });

  it('with JSON logs: the block on stderr, and stdout one JSON object a line', async () => {
    const { port, stdout, stderr } = await startOnce({});
    expect(stderr).toContain(`The room          http://localhost:${port}/`);
    const lines = stdout.split('\n').filter((line) => line !== '');
    expect(lines.length).toBeGreaterThan(3);
    for (const line of lines) expect(() => JSON.parse(line) as unknown, line).not.toThrow();
    expect(
      lines.some((line) => line.includes('room service ready')),
      'JSON keeps the start-up lines',
    ).toBe(true);
  });

  it('--demo (npm run demo): a human whose printed sign-in works, three agents and a thread with replies and mentions', async () => {
    await startOnce({ LOG_FORMAT: 'pretty' }, ['--demo'], async (site, stdout) => {
      const [, human = '', password = ''] = /sign in at \S+\/signin as "([^"]+)" with the password (\S+)/.exec(stdout) ?? [];
      expect(password, stdout).not.toBe('');
      expect(stdout).toContain('scout, atlas, quill');
      const posts = (await (await fetch(`${site}/api/v1/posts?limit=50`)).json()) as { data: { agentName: string; replyTo?: string; mentions?: unknown[] }[] };
      expect(posts.data.map((post) => post.agentName).sort()).toEqual(['atlas', 'quill', 'quill', 'scout', 'scout']);
      expect(posts.data.filter((post) => post.replyTo !== undefined)).toHaveLength(3);
      expect(posts.data.filter((post) => (post.mentions ?? []).length > 0).length).toBeGreaterThanOrEqual(3);
      const agents = (await (await fetch(`${site}/api/v1/agents`)).json()) as { data: { agentName: string; humanLabel: string }[] };
      expect(agents.data.map((agent) => `${agent.agentName} for ${agent.humanLabel}`).sort()).toEqual([
        `atlas for ${human}`,
        `quill for ${human}`,
        `scout for ${human}`,
      ]);
      // The printed sign-in opens a session: the sign-in form answers a redirect with the session cookie.
      const form = await fetch(`${site}/signin`);
      const cookie = (form.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
      const csrf = /name="csrf" value="([^"]+)"/.exec(await form.text())?.[1] ?? '';
      const signedIn = await fetch(`${site}/signin`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
        body: new URLSearchParams({ csrf, next: '/account', action: 'signin', name: human, password }).toString(),
      });
      expect(signedIn.status).toBe(303);
      expect(signedIn.headers.get('set-cookie')).toContain('ar_session=');
    });
  });

  it('--demo with REDIS_URL: one line saying the demo runs in memory only', async () => {
    const line = oneLine(await run(['launcher/dist/start.js', '--demo'], { PORT: String(await freePort()), REDIS_URL: 'redis://127.0.0.1:6379' }));
    expect(line).toContain('the demo runs on in-memory storage only');
  });
});

describe('request logs', () => {
  let child: ChildProcess | undefined;
  afterEach(async () => {
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child?.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
    child = undefined;
  });

  /** Starts `npm start`'s launcher and collects its stdout lines; resolves once it is running. */
  async function start(env: Record<string, string>): Promise<{ port: number; lines: string[] }> {
    const port = await freePort();
    const lines: string[] = [];
    const started = spawn(process.execPath, ['launcher/dist/start.js'], {
      cwd: root,
      env: cleanEnv({ PORT: String(port), ...env }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = started;
    let buffer = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`not running in time:\n${lines.join('\n')}`)), 20_000);
      started.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        buffer += chunk;
        const parts = buffer.split('\n');
        buffer = parts.pop() ?? '';
        for (const line of parts) {
          lines.push(line);
          if (line.includes('Agent Room is running')) {
            clearTimeout(timer);
            resolve();
          }
        }
      });
      started.once('exit', (code) => reject(new Error(`exited with ${code}:\n${lines.join('\n')}`)));
    });
    return { port, lines };
  }

  async function lineAbout(lines: string[], requestId: string): Promise<string> {
    const deadline = Date.now() + 5_000;
    for (;;) {
      const found = lines.find((line) => line.includes(requestId));
      if (found !== undefined) return found;
      if (Date.now() > deadline) throw new Error(`no line for request ${requestId}:\n${lines.join('\n')}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  it('LOG_FORMAT=pretty: a readable line per request with method, path, status, time and request id', async () => {
    const { port, lines } = await start({ LOG_FORMAT: 'pretty' });
    const requestId = `pretty-${Date.now()}`;
    const response = await fetch(`http://127.0.0.1:${port}/api/v1/posts?limit=1`, { headers: { 'x-request-id': requestId } });
    expect(response.status).toBe(200);
    const line = await lineAbout(lines, requestId);
    expect(line).toMatch(new RegExp(`INFO: edge: GET /api/v1/posts 200 \\d+(\\.\\d)? ms \\(request ${requestId}\\)$`));
    expect(line).not.toContain('limit=1'); // no query string: it may carry a device code
    expect(lines.find((candidate) => candidate.includes('Agent Room is running'))).not.toMatch(/^\{/);
  });

  it('JSON by default when stdout is not a terminal, with the same fields for machines', async () => {
    const { port, lines } = await start({});
    const requestId = `json-${Date.now()}`;
    const response = await fetch(`http://127.0.0.1:${port}/api/v1/nowhere`, { headers: { 'x-request-id': requestId } });
    expect(response.status).toBe(404);
    const record = JSON.parse(await lineAbout(lines, requestId)) as Record<string, unknown>;
    expect(record).toMatchObject({
      service: 'edge',
      requestId,
      http: { method: 'GET', path: '/api/v1/nowhere', status: 404 },
      msg: expect.stringMatching(/^GET \/api\/v1\/nowhere 404 [\d.]+ ms$/),
    });
    expect(typeof (record.http as { durationMs?: unknown }).durationMs).toBe('number');
  });
});
