import { spawn } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { hashSecret } from '@agentroom/kit/domain';
import { CLIENT_OPTIONS, unaryCall } from '@agentroom/kit/grpc';
import { freePort, type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { connectRedis, type Redis } from '@agentroom/kit/store';
import { type ServiceProcess, startServiceProcess } from '@agentroom/testkit';
import {
  type AuthenticateTokenResponse__Output,
  authProto,
  type AuthServiceClient,
  type GetAgentResponse__Output,
  type ResolveSessionResponse__Output,
  roomProto,
  type RoomServiceClient,
} from '@agentroom/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashPassword, PASSWORD_HASH_COST_MIN } from '../src/humans.js';
import type { Human } from '../src/records.js';
import { RedisAuthStore } from '../src/store-redis.js';

/** The command as the image runs it: `node services/auth/dist/agents-cli.js` (npm run build first). */
const CLI = fileURLToPath(new URL('../dist/agents-cli.js', import.meta.url));
const PREFIX = 'cli';
const env = { SITE_URL: 'http://room.test', LOG_LEVEL: 'info', LOG_FORMAT: 'json', SHUTDOWN_GRACE_MS: '1000' } as const;

let redisServer: LocalRedis;
let redis: Redis;
/** Auth's own records, read the way auth reads them. */
let store: RedisAuthStore;
let room: ServiceProcess;
/** Where auth audits what an operator does (granting a moderator): PGlite in memory. */
let record: ServiceProcess;
let auth: ServiceProcess;
let authClient: AuthServiceClient;
let roomClient: RoomServiceClient;
let dir: string;
let ada: Human;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the command line as an operator would, and answers how it ended; `onStderr` sees its error output as it comes. */
function agents(args: string[], onStderr?: (soFar: string) => void): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, AUTH_ADDR: '', AUTH_GRPC_ADDR: '' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
      onStderr?.(stderr);
    });
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const provision = (...more: string[]): Promise<Run> => agents(['provision', '--auth', auth.address, ...more]);

/** The file format k6 scripts read. */
interface TokensFile {
  auth: string;
  human: string;
  createdAt: string;
  agents: { id: string; name: string; token: string; scopes: string[] }[];
}

beforeAll(async () => {
  redisServer = await startRedisServer();
  redis = connectRedis(redisServer.url, 'agents-cli-test');
  store = new RedisAuthStore(redis, PREFIX);
  room = await startServiceProcess({ service: 'room', addressVariable: 'ROOM_GRPC_ADDR', env: { ...env, LOG_LEVEL: 'silent' } });
  record = await startServiceProcess({ service: 'record', addressVariable: 'RECORD_GRPC_ADDR', env: { ...env, LOG_LEVEL: 'silent', ROOM_ADDR: room.address } });
  auth = await startServiceProcess({
    service: 'auth',
    addressVariable: 'AUTH_GRPC_ADDR',
    env: {
      ...env,
      ROOM_ADDR: room.address,
      RECORD_ADDR: record.address,
      REDIS_URL: redisServer.url,
      REDIS_KEY_PREFIX: PREFIX,
      AUTH_HTTP_PORT: '0',
      AUTH_HTTP_HOST: '127.0.0.1',
    },
  });
  authClient = new (authProto().AuthService)(auth.address, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
  roomClient = new (roomProto().RoomService)(room.address, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
  // A human who registered earlier, in auth's own storage (the pages' registration does the same).
  ada = { id: 'h_cli_ada', name: 'Ada Lovelace', passwordHash: await hashPassword('correct horse', PASSWORD_HASH_COST_MIN), createdAt: Date.now() };
  await store.createHuman(ada);
  dir = await mkdtemp(join(tmpdir(), 'agents-cli-'));
});

afterAll(async () => {
  authClient.close();
  roomClient.close();
  await auth.stop();
  await record.stop();
  await room.stop();
  await redis.quit();
  await redisServer.stop();
  await rm(dir, { recursive: true, force: true });
});

/** One line on stderr, nothing on stdout: what every refusal looks like. */
function expectOneLine(run: Run, code: number): string {
  expect({ code: run.code, stdout: run.stdout }).toEqual({ code, stdout: '' });
  expect(run.stderr).toMatch(/^agents: [^\n]+\n$/);
  return run.stderr;
}

const exists = (path: string): Promise<boolean> =>
  stat(path).then(
    () => true,
    () => false,
  );

describe('npm run agents -- provision, against a running auth process', () => {
  it("provisions agents in a human's name: a 0600 file k6 reads, tokens that work, agents in the room, each logged by auth without its token", async () => {
    const out = join(dir, 'tokens.json');
    const run = await provision(
      '--human',
      'ada LOVELACE',
      '--count',
      '3',
      '--prefix',
      'k6',
      '--scopes',
      'messages:read,posts:write',
      '--reason',
      'k6 load test',
      '--out',
      out,
    );
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(
      /^agents: provisioned 3 agent\(s\) for "Ada Lovelace" in [\d.]+ s \([\d,]+ agents\/s\), scopes posts:write,messages:read; tokens in .*tokens\.json \(mode 0600: it holds secrets\)\. They are listed on that human's account page, where they can be revoked\.\n$/,
    );
    expect((await stat(out)).mode & 0o777).toBe(0o600);

    const file = JSON.parse(await readFile(out, 'utf8')) as TokensFile;
    expect(Object.keys(file)).toEqual(['auth', 'human', 'createdAt', 'agents']);
    expect(file).toMatchObject({ auth: auth.address, human: 'Ada Lovelace' });
    expect(Math.abs(Date.parse(file.createdAt) - Date.now())).toBeLessThan(60_000);
    expect(file.agents.map((a) => [a.name, a.scopes])).toEqual([
      ['k6-1', ['posts:write', 'messages:read']],
      ['k6-2', ['posts:write', 'messages:read']],
      ['k6-3', ['posts:write', 'messages:read']],
    ]);
    for (const agent of file.agents) {
      expect(Object.keys(agent)).toEqual(['id', 'name', 'token', 'scopes']);
      const principal = await unaryCall<AuthenticateTokenResponse__Output>(2_000, (metadata, options, callback) =>
        authClient.authenticateToken({ token: agent.token }, metadata, options, callback),
      );
      expect(principal).toMatchObject({ agentId: agent.id, agentName: agent.name, humanLabel: 'Ada Lovelace', scopes: ['posts:write', 'messages:read'] });
      const inRoom = await unaryCall<GetAgentResponse__Output>(2_000, (metadata, options, callback) =>
        roomClient.getAgent({ agentId: agent.id }, metadata, options, callback),
      );
      expect(inRoom.agent).toMatchObject({ agentName: agent.name, humanLabel: 'Ada Lovelace', scopes: ['posts:write', 'messages:read'] });
    }
    const records = (await store.liveTokensOfHuman(ada.id, 'provisioned', 50)).tokens.filter((t) => file.agents.some((a) => a.id === t.agentId));
    expect(records.map((t) => t.provisioned?.reason)).toEqual(['k6 load test', 'k6 load test', 'k6 load test']);

    // Auth's log: one line per agent, with who asked and why; the tokens appear nowhere in it.
    const logged = auth.lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.msg === 'agent provisioned by an operator');
    expect(logged.map((line) => line.agentId).sort()).toEqual(file.agents.map((a) => a.id).sort());
    for (const line of logged)
      expect(line).toMatchObject({
        reason: 'k6 load test',
        humanId: ada.id,
        scopes: ['posts:write', 'messages:read'],
        caller: expect.stringMatching(/^127\.0\.0\.1:\d+$/),
      });
    for (const agent of file.agents) expect(auth.lines.join('\n')).not.toContain(agent.token);
  });

  it('reports progress every 50 agents with a rate, then one summary line', async () => {
    const out = join(dir, 'many.json');
    const run = await provision('--human', 'Ada Lovelace', '--count', '120', '--concurrency', '16', '--scopes', 'agents:read', '--out', out);
    expect(run.code).toBe(0);
    const lines = run.stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/^agents: 50 of 120 provisioned \([\d,]+ agents\/s\)$/);
    expect(lines[1]).toMatch(/^agents: 100 of 120 provisioned \([\d,]+ agents\/s\)$/);
    expect(lines[2]).toMatch(/^agents: provisioned 120 agent\(s\)/);
    const file = JSON.parse(await readFile(out, 'utf8')) as TokensFile;
    expect(file.agents.map((a) => a.name)).toEqual(Array.from({ length: 120 }, (_, i) => `load-${String(i + 1).padStart(3, '0')}`));
    expect(new Set(file.agents.map((a) => a.token)).size).toBe(120);
  });

  it('writes the tokens to stdout with --out -, and says the rest on stderr', async () => {
    const run = await provision('--human', 'Ada Lovelace', '--name', 'solo writer', '--scopes', 'posts:write', '--out', '-');
    expect(run.code).toBe(0);
    const file = JSON.parse(run.stdout) as TokensFile;
    expect(file.agents).toHaveLength(1);
    expect(file.agents[0]).toMatchObject({ name: 'solo writer', scopes: ['posts:write'] });
    expect(run.stderr).toContain('tokens in stdout');
  });

  it('never replaces an existing file without --force; with it, the new file is 0600 whatever the old one was', async () => {
    const out = join(dir, 'kept.json');
    await writeFile(out, 'keep me\n');
    await chmod(out, 0o644);
    const before = (await store.liveTokensOfHuman(ada.id, 'provisioned', 1)).total;
    const refused = await provision('--human', 'Ada Lovelace', '--scopes', 'posts:write', '--out', out);
    expect(expectOneLine(refused, 2)).toContain(`${out} exists; pass --force to replace it, or choose another --out`);
    expect(await readFile(out, 'utf8')).toBe('keep me\n');
    // Refused before anything was provisioned.
    expect((await store.liveTokensOfHuman(ada.id, 'provisioned', 1)).total).toBe(before);

    const forced = await provision('--human', 'Ada Lovelace', '--scopes', 'posts:write', '--out', out, '--force');
    expect(forced.code).toBe(0);
    expect((await stat(out)).mode & 0o777).toBe(0o600);
    expect((JSON.parse(await readFile(out, 'utf8')) as TokensFile).agents).toHaveLength(1);
  });

  it('says in one line (exit 2) that the human has no account, and where humans register; nothing is written', async () => {
    const out = join(dir, 'nobody.json');
    const run = await provision('--human', 'Nobody Yet', '--count', '5', '--scopes', 'posts:write', '--out', out);
    expect(expectOneLine(run, 2)).toBe(
      'agents: No human is named "Nobody Yet" here; humans register themselves at http://room.test/signin. Register that human once there (in a browser, or with curl as load-tests/README.md shows under "Tokens"), then run this again\n',
    );
    expect(await exists(out)).toBe(false);
  });

  it('says in one line (exit 1) what to do when no auth service answers', async () => {
    const nowhere = `127.0.0.1:${await freePort()}`;
    const out = join(dir, 'nowhere.json');
    const run = await agents(['provision', '--auth', nowhere, '--human', 'Ada Lovelace', '--scopes', 'posts:write', '--out', out]);
    expect(expectOneLine(run, 1)).toContain(
      `agents: no auth service answers at ${nowhere} (gRPC): start one with \`npm run cluster\` and pass --auth with the auth address its ready line prints`,
    );
    expect(await exists(out)).toBe(false);
  });

  it.concurrent.each([
    [[], '--human is required'],
    [['--human', 'Ada Lovelace', '--scopes', 'posts:write'], '--out is required'],
    [
      ['--human', 'Ada Lovelace', '--scopes', 'posts:write,root', '--out', 'x.json'],
      'unknown scope "root"; the scopes are agents:read, posts:write, messages:read, messages:write',
    ],
    [['--human', 'Ada Lovelace', '--scopes', ',', '--out', 'x.json'], '--scopes names no scope'],
    [['--human', 'Ada Lovelace', '--scopes', 'posts:write', '--out', 'x.json', '--count', '0'], '--count must be a whole number from 1 to 100,000, not "0"'],
    [['--human', 'Ada Lovelace', '--scopes', 'posts:write', '--out', 'x.json', '--count', '2', '--name', 'one'], '--name makes one agent'],
    [['--human', 'Ada Lovelace', '--scopes', 'posts:write', '--out', 'x.json', '--auth', 'not an address'], '--auth must be HOST:PORT'],
    [['--human', 'Ada Lovelace', '--scopes', 'posts:write', '--out', 'x.json', '--create-human'], "Unknown option '--create-human'"],
  ])('refuses %j in one line with exit 2: %s', async (args, says) => {
    const run = await agents(['provision', ...args]);
    const line = expectOneLine(run, 2);
    expect(line).toContain(says);
    expect(line).toContain('usage: npm run agents -- provision --human NAME --scopes SCOPE[,SCOPE…] --out FILE|-');
  });
});

describe('a run that stops half-way', () => {
  it('writes the agents it made, says how many of how many and why, and exits 1', async () => {
    const out = join(dir, 'half.json');
    // The room goes away under the run, once its first progress line says agents are being made:
    // auth can make no more.
    let progressed!: () => void;
    const underWay = new Promise<void>((resolve) => (progressed = resolve));
    const running = agents(
      ['provision', '--auth', auth.address, '--human', 'Ada Lovelace', '--count', '3000', '--concurrency', '4', '--scopes', 'posts:write', '--out', out],
      (soFar) => {
        if (/agents: \d+ of 3000 provisioned/.test(soFar)) progressed();
      },
    );
    await underWay;
    await room.stop();
    const run = await running;
    expect({ code: run.code, stdout: run.stdout }).toEqual({ code: 1, stdout: '' });
    // Progress lines, then the one that says what happened.
    expect(run.stderr.trimEnd().split('\n').at(-1)).toMatch(
      /^agents: provisioned (\d+) of 3000 agents, written to .*half\.json \(mode 0600: it holds secrets\), then stopped: auth at 127\.0\.0\.1:\d+ could not make the agent: .+ \(its storage or the room service is down: see auth's log\), then run this again$/,
    );
    const made = Number(/provisioned (\d+) of/.exec(run.stderr)?.[1]);
    const file = JSON.parse(await readFile(out, 'utf8')) as TokensFile;
    expect(file.agents).toHaveLength(made);
    expect(made).toBeGreaterThan(0);
    expect((await stat(out)).mode & 0o777).toBe(0o600);
    // Each of them works.
    for (const agent of file.agents.slice(0, 5)) {
      const principal = await unaryCall<AuthenticateTokenResponse__Output>(2_000, (metadata, options, callback) =>
        authClient.authenticateToken({ token: agent.token }, metadata, options, callback),
      );
      expect(principal.agentId).toBe(agent.id);
    }
  });
});

describe('npm run agents -- moderator, against a running auth process', () => {
  const moderator = (...more: string[]): Promise<Run> => agents(['moderator', ...more, '--auth', auth.address]);
  /** Ada signed in, as the pages sign a human in, and what her session resolves to. */
  const resolved = async (): Promise<boolean> => {
    const sessionId = `s${Math.random().toString(36).slice(2)}`;
    await store.saveSession({ idHash: hashSecret(sessionId), humanId: ada.id, csrf: 'c', expiresAt: Date.now() + 60_000 });
    const answer = await unaryCall<ResolveSessionResponse__Output>(2_000, (metadata, options, callback) =>
      authClient.resolveSession({ sessionId }, metadata, options, callback),
    );
    return answer.moderator;
  };

  it("grants the role by name (any case), lists it, shows it in the human's session, and takes it", async () => {
    expect(await resolved()).toBe(false);
    const granted = await moderator('grant', 'ADA lovelace');
    expect(granted).toMatchObject({ code: 0, stdout: '' });
    expect(granted.stderr).toBe('agents: "Ada Lovelace" is a moderator: their next page shows the moderation queue\n');
    expect(await resolved()).toBe(true);
    expect(await store.isModerator(ada.id)).toBe(true);
    const listed = await moderator('list');
    expect(listed).toMatchObject({ code: 0, stdout: 'Ada Lovelace\n' });
    const revoked = await moderator('revoke', 'Ada Lovelace');
    expect(revoked).toMatchObject({ code: 0, stderr: 'agents: "Ada Lovelace" is no longer a moderator\n' });
    expect(await resolved()).toBe(false);
    expect((await moderator('list')).stdout).toBe('');
  });

  it('says in one line (exit 2) that no human has the name, and refuses a malformed command with its usage', async () => {
    expect(expectOneLine(await moderator('grant', 'Nobody'), 2)).toBe('agents: no human is named "Nobody": they sign up at /signin first\n');
    expect(expectOneLine(await moderator('promote', 'Ada'), 2)).toMatch(/^agents: moderator takes grant NAME, revoke NAME or list; usage: /);
    expect(expectOneLine(await moderator('grant'), 2)).toMatch(/^agents: moderator grant takes one human's name/);
  });
});
