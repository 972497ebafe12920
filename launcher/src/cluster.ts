// `npm run cluster`: every service as its own process, Redis required, the router in front.
// The topology of a Kubernetes deployment, on one machine.
import '@agentroom/gateway/node-version';
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import {
  assertPortFree,
  createLogger,
  cursorSecretEnv,
  exitOnStartupFailure,
  freePort,
  HealthChecker,
  loadConfigOrExit,
  type LocalRedis,
  logEnv,
  newCursorSecret,
  openRedis,
  port,
  publicUrls,
  publicUrlsEnv,
  startRedisServer,
  startupProblem,
  storageEnv,
} from '@agentroom/kit';
import { z } from 'zod';

const clusterEnv = z.object({
  /** How many edge processes the router balances over. */
  EDGE_REPLICAS: z.coerce.number().int().min(1).max(16).default(1),
  ROOM_GRPC_PORT: port.optional(),
  ...publicUrlsEnv.shape,
  ...storageEnv.shape,
  ...logEnv.shape,
  ...cursorSecretEnv.shape,
});

const config = loadConfigOrExit(clusterEnv, 'cluster');
const log = createLogger('cluster', config.LOG_LEVEL, config.LOG_FORMAT);
const urls = publicUrls(config);
let redis: LocalRedis | undefined;
let stopping = false;
/** Set once the cluster is ready: from then on a process that exits is restarted, not fatal. */
let supervising = false;

function entry(pkg: string, file: string): string {
  return fileURLToPath(new URL(file, import.meta.resolve(pkg)));
}

/** Where each process serves Prometheus `/metrics` (ADMIN_PORT), by process name. */
const metrics: Record<string, string> = {};

/**
 * Restarts after a crash, as a Kubernetes kubelet would: the first after half a second, each next
 * one twice as late up to 10 s, and back to half a second once the process has stayed up 20 s.
 */
const RESTART_BACKOFF = { initialMs: 500, maxMs: 10_000, stableMs: 20_000 } as const;

/** One supervised process: what it runs, its current child, and how its restarts stand. */
interface Supervised {
  name: string;
  script: string;
  env: NodeJS.ProcessEnv;
  ipc: boolean;
  child: ChildProcess;
  startedAt: number;
  restarts: number;
  nextDelayMs: number;
  timer?: NodeJS.Timeout;
}

const processes: Supervised[] = [];

function spawnChild(spec: Pick<Supervised, 'script' | 'env' | 'ipc'>): ChildProcess {
  return spawn(process.execPath, ['--enable-source-maps', spec.script], {
    env: spec.env,
    stdio: spec.ipc ? ['ignore', 'inherit', 'inherit', 'ipc'] : ['ignore', 'inherit', 'inherit'],
  });
}

/** Starts one process; with `ipc`, it has a channel to tell us it listens (the router). */
async function launch(name: string, script: string, env: Record<string, string>, ipc = false): Promise<ChildProcess> {
  const metricsPort = await freePort();
  metrics[name] = `http://127.0.0.1:${metricsPort}/metrics`;
  // The same environment on every restart: same ports, same addresses, so peers find it again.
  const spec = { name, script, env: { ...process.env, ADMIN_PORT: String(metricsPort), ...env }, ipc };
  const supervised: Supervised = { ...spec, child: spawnChild(spec), startedAt: Date.now(), restarts: 0, nextDelayMs: RESTART_BACKOFF.initialMs };
  processes.push(supervised);
  watch(supervised);
  return supervised.child;
}

function watch(supervised: Supervised): void {
  const { child, name } = supervised;
  child.once('exit', (code, signal) => {
    if (stopping) return;
    if (!supervising) {
      // Still starting: a process that cannot start is a configuration problem, said once, not a loop.
      log.error({ process: name, code, signal }, `${name} exited; stopping the cluster`);
      void stop(1);
      return;
    }
    const upMs = Date.now() - supervised.startedAt;
    if (upMs >= RESTART_BACKOFF.stableMs) supervised.nextDelayMs = RESTART_BACKOFF.initialMs;
    const delayMs = supervised.nextDelayMs;
    supervised.nextDelayMs = Math.min(delayMs * 2, RESTART_BACKOFF.maxMs);
    supervised.restarts += 1;
    log.warn(
      { process: name, pid: child.pid, code, signal, upMs, restart: supervised.restarts, delayMs },
      `${name} exited (${signal ?? `code ${code}`}) after ${(upMs / 1000).toFixed(1)} s; restarting it in ${(delayMs / 1000).toFixed(1)} s (restart ${supervised.restarts})`,
    );
    supervised.timer = setTimeout(() => {
      supervised.timer = undefined;
      if (stopping) return;
      supervised.child = spawnChild(supervised);
      supervised.startedAt = Date.now();
      log.info({ process: name, pid: supervised.child.pid, restart: supervised.restarts }, `${name} restarted (pid ${supervised.child.pid ?? '?'}, restart ${supervised.restarts})`);
      watch(supervised);
    }, delayMs);
  });
}

async function waitFor(what: string, ready: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await ready())) {
    if (stopping) throw new Error('stopped while starting');
    if (Date.now() > deadline) throw new Error(`${what} was not ready within ${timeoutMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function httpAnswers(url: string): Promise<boolean> {
  try {
    await fetch(url, { signal: AbortSignal.timeout(1_000) });
    return true;
  } catch {
    return false;
  }
}

/** Resolves when the child says it listens; fails if it exits first (it has said why on its own). */
async function listening(name: string, child: ChildProcess, timeoutMs = 20_000): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} was not listening within ${timeoutMs / 1000} s`)), timeoutMs);
    child.once('message', () => {
      clearTimeout(timer);
      resolve();
    });
    child.once('exit', () => {
      clearTimeout(timer);
      reject(new Error(`${name} exited before listening`));
    });
  });
}

/** Stops every process started so far; `failure`, when given, is the last line printed (on stderr). */
async function stop(code: number, failure?: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  // Front to back: the router stops taking requests first, storage goes last.
  for (const supervised of [...processes].reverse()) {
    if (supervised.timer !== undefined) clearTimeout(supervised.timer);
    const { child } = supervised;
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
  }
  await redis?.stop();
  if (failure === undefined) log.info('cluster stopped');
  else process.stderr.write(`${failure}\n`);
  process.exit(code);
}

process.on('SIGTERM', () => void stop(0));
process.on('SIGINT', () => void stop(0));

// What a person can fix is found before anything starts, and said in one line: a busy PORT, a
// Redis at REDIS_URL that does not answer or refuses us.
try {
  await assertPortFree(config.PORT);
  if (config.REDIS_URL !== undefined) await (await openRedis(config.REDIS_URL, 'cluster')).quit();
} catch (error) {
  exitOnStartupFailure('cluster', error, log, { ports: { PORT: config.PORT } });
}

try {
  let redisUrl = config.REDIS_URL;
  if (redisUrl === undefined) {
    redis = await startRedisServer();
    redisUrl = redis.url;
    log.info({ redis: redisUrl }, `REDIS_URL is not set: started a local redis-server at ${redisUrl} (not persisted; set REDIS_URL to use your own)`);
  }
  // Every process gets the same cursor secret, so a cursor works whichever process reads it (docs/decisions.md §6).
  const CURSOR_SECRET = config.CURSOR_SECRET ?? newCursorSecret();
  const common = { REDIS_URL: redisUrl, REDIS_KEY_PREFIX: config.REDIS_KEY_PREFIX, SITE_URL: urls.siteUrl, API_URL: urls.apiUrl, CURSOR_SECRET };

  const roomPort = config.ROOM_GRPC_PORT ?? (await freePort());
  const roomAddr = `127.0.0.1:${roomPort}`;
  await launch('room', entry('@agentroom/room', './main.js'), { ...common, ROOM_GRPC_ADDR: roomAddr });
  const roomHealth = new HealthChecker(roomAddr);
  await waitFor('room', async () => (await roomHealth.check()) === 'SERVING');
  roomHealth.close();

  const messagingAddr = `127.0.0.1:${await freePort()}`;
  await launch('messaging', entry('@agentroom/messaging', './main.js'), { ...common, MESSAGING_GRPC_ADDR: messagingAddr, ROOM_ADDR: roomAddr });
  const messagingHealth = new HealthChecker(messagingAddr);
  await waitFor('messaging', async () => (await messagingHealth.check()) === 'SERVING');
  messagingHealth.close();

  const authAddr = `127.0.0.1:${await freePort()}`;
  const authHttpPort = await freePort();
  await launch('auth', entry('@agentroom/auth', './main.js'), { ...common, AUTH_GRPC_ADDR: authAddr, ROOM_ADDR: roomAddr, AUTH_HTTP_PORT: String(authHttpPort), AUTH_HTTP_HOST: '127.0.0.1' });
  const authHealth = new HealthChecker(authAddr);
  await waitFor('auth', async () => (await authHealth.check()) === 'SERVING');
  authHealth.close();

  const edgeUrls: string[] = [];
  for (let i = 0; i < config.EDGE_REPLICAS; i += 1) {
    const edgePort = await freePort();
    await launch(`edge-${i + 1}`, entry('@agentroom/edge', './main.js'), { ...common, ROOM_ADDR: roomAddr, AUTH_ADDR: authAddr, MESSAGING_ADDR: messagingAddr, EDGE_PORT: String(edgePort), EDGE_HOST: '127.0.0.1' });
    edgeUrls.push(`http://127.0.0.1:${edgePort}`);
  }
  for (const url of edgeUrls) await waitFor(url, () => httpAnswers(url));

  const router = await launch('router', entry('@agentroom/gateway', './main.js'), { ...common, PORT: String(config.PORT), EDGE_URLS: edgeUrls.join(','), AUTH_URLS: `http://127.0.0.1:${authHttpPort}` }, true);
  const routerUrl = `http://127.0.0.1:${config.PORT}`;
  // Its own word, not an answer on PORT: another process may hold PORT, and would answer too.
  await listening('router', router);

  supervising = true;
  const pids = Object.fromEntries(processes.map(({ name, child }) => [name, child.pid]));
  log.info(
    { site: urls.siteUrl, api: urls.baseUrl, room: roomAddr, messaging: messagingAddr, auth: authAddr, edges: edgeUrls, router: routerUrl, redis: redisUrl, metrics, pids },
    `cluster ready at ${urls.siteUrl}: room, messaging, auth, ${edgeUrls.length} edge process(es) and the router, on Redis`,
  );
} catch (error) {
  const problem = startupProblem(error, { ports: { PORT: config.PORT } });
  if (problem === undefined) log.fatal({ err: error }, `cluster could not start: ${(error as Error).message}`);
  await stop(1, problem === undefined ? undefined : `cluster could not start: ${problem}`);
}
