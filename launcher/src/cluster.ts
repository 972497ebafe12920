// `npm run cluster`: every service as its own process (or several: `<SERVICE>_REPLICAS`), Redis
// and PostgreSQL required (each started here when no URL names one), the router in front. The topology of a Kubernetes deployment, on one machine. `npm run cluster -- --envoy` puts Envoy
// (.venv/bin/envoy) on PORT instead of the router, configured as in Kubernetes, from the route table.
import '@agentroom/gateway/node-version';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { cursorSecretEnv, loadConfigOrExit, logEnv, port, publicUrls, publicUrlsEnv, storageEnv } from '@agentroom/kit/config';
import { HealthChecker } from '@agentroom/kit/grpc';
import { newCursorSecret } from '@agentroom/kit/http';
import { freePort, type LocalPostgres, type LocalRedis, NODE_FLAGS, reservePort, startPostgresServer, startRedisServer } from '@agentroom/kit/local';
import { createLogger } from '@agentroom/kit/log';
import { assertPortFree, exitingWithParent, exitOnStartupFailure, onParentGone, startupProblem } from '@agentroom/kit/process';
import { openRedis } from '@agentroom/kit/store';
import { telemetryEnv, tracingEnabled } from '@agentroom/kit/telemetry';
import { databaseEnv, openDatabase, redactUrl } from '@agentroom/record';
import { z } from 'zod';

// The only flag: anything else is a mistake, said in one line before anything starts.
const FLAGS = ['--envoy'] as const;
const unknownFlag = process.argv.slice(2).find((arg) => !(FLAGS as readonly string[]).includes(arg));
if (unknownFlag !== undefined) {
  process.stderr.write(
    `cluster: unknown argument ${JSON.stringify(unknownFlag)}; the only one is --envoy (Envoy on PORT instead of the router): npm run cluster -- --envoy\n`,
  );
  process.exit(2);
}
const withEnvoy = process.argv.includes('--envoy');
/** The Envoy that `scripts/install-python-tools.sh` installs into the project's virtualenv. */
const ENVOY_BIN = fileURLToPath(new URL('../../.venv/bin/envoy', import.meta.url));
if (withEnvoy && !existsSync(ENVOY_BIN)) {
  process.stderr.write(`cluster: --envoy runs ${ENVOY_BIN}, which is not installed: bash scripts/install-python-tools.sh\n`);
  process.exit(1);
}

const clusterEnv = z.object({
  /** How many edge processes the router balances over. */
  EDGE_REPLICAS: z.coerce.number().int().min(1).max(16).default(1),
  /** How many auth processes: edges spread their calls over all of them, the router their pages. */
  AUTH_REPLICAS: z.coerce.number().int().min(1).max(8).default(1),
  /** How many room processes: edge, messaging and auth spread their calls over all of them. */
  ROOM_REPLICAS: z.coerce.number().int().min(1).max(8).default(1),
  /** How many messaging processes: edge and delivery spread their calls over all of them; one at a time turns posts into notifications. */
  MESSAGING_REPLICAS: z.coerce.number().int().min(1).max(8).default(1),
  /** How many delivery processes: they share the webhook queue; one at a time follows messaging's events. */
  DELIVERY_REPLICAS: z.coerce.number().int().min(1).max(8).default(1),
  /** How many record processes: edge spreads its reads and searches over all of them; one at a time keeps the room's posts. */
  RECORD_REPLICAS: z.coerce.number().int().min(1).max(8).default(1),
  /** The first room process's gRPC port (the others take free ports). */
  ROOM_GRPC_PORT: port.optional(),
  /**
   * Passed to delivery: lets webhooks target private and loopback addresses, so an endpoint on this
   * machine (a test receiver) gets them. Off by default, as in a deployment.
   */
  WEBHOOKS_ALLOW_PRIVATE_TARGETS: z
    .enum(['true', 'false'])
    .transform((value) => value === 'true')
    .default(false),
  ...publicUrlsEnv.shape,
  ...storageEnv.shape,
  ...logEnv.shape,
  ...cursorSecretEnv.shape,
  ...databaseEnv.shape,
  // Tracing: the OpenTelemetry SDK's own variables, passed to every process (and Envoy's tracer with --envoy).
  ...telemetryEnv.shape,
});

const config = loadConfigOrExit(clusterEnv, 'cluster');
// Envoy's rendering is loaded only when asked for; its variables (the router's) are checked now, before anything starts.
const gateway = withEnvoy ? await import('@agentroom/gateway/envoy') : undefined;
const envoyConfig = gateway ? loadConfigOrExit(gateway.envoyEnv, 'cluster') : undefined;
// Envoy's spans, when the services export theirs, to the same receiver if Envoy can reach it (plain HTTP): docs/decisions.md §50.
const tracing = gateway ? gateway.envoyTracing(loadConfigOrExit(gateway.tracingEnv, 'cluster')) : undefined;
const log = createLogger('cluster', config.LOG_LEVEL, config.LOG_FORMAT);
const urls = publicUrls(config);
let redis: LocalRedis | undefined;
/** The PostgreSQL the launcher started for the record, when DATABASE_URL names none. */
let postgres: LocalPostgres | undefined;
/** With --envoy: the directory of its bootstrap and documents, removed on stop. */
let envoyDir: string | undefined;
let stopping = false;
/** Set once the cluster is ready: from then on a process that exits is restarted, not fatal. */
let supervising = false;

function entry(pkg: string, file: string): string {
  return fileURLToPath(new URL(file, import.meta.resolve(pkg)));
}

/** Where each process serves Prometheus `/metrics` (ADMIN_PORT), by process name. */
const metrics: Record<string, string> = {};
/** Each process's ADMIN_PORT, by process name: Envoy health-checks `/readyz` there. */
const adminPorts: Record<string, number> = {};

/**
 * Restarts after a crash, as a Kubernetes kubelet would: the first after half a second, each next
 * one twice as late up to 10 s, and back to half a second once the process has stayed up 20 s.
 */
const RESTART_BACKOFF = { initialMs: 500, maxMs: 10_000, stableMs: 20_000 } as const;

/** One supervised process: what it runs, its current child, and how its restarts stand. */
interface Supervised {
  name: string;
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  /** A Node process of ours, with an IPC channel; otherwise a program (Envoy) run through a watcher of its stdin. */
  node: boolean;
  child: ChildProcess;
  startedAt: number;
  restarts: number;
  nextDelayMs: number;
  timer?: NodeJS.Timeout;
}

const processes: Supervised[] = [];

/**
 * Every process exits by itself once the launcher is gone, however it died (kill -9 included): a
 * Node process when its IPC channel to us closes (the router also says over it that it listens),
 * another program when its stdin, a pipe only we hold, ends (kit's exitingWithParent).
 */
function spawnChild(spec: Pick<Supervised, 'command' | 'args' | 'env' | 'node'>): ChildProcess {
  if (spec.node) return spawn(spec.command, spec.args, { env: spec.env, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const program = exitingWithParent(spec.command, spec.args);
  const child = spawn(program.command, program.args, { env: spec.env, stdio: ['pipe', 'pipe', 'pipe'] });
  child.stdin?.on('error', () => undefined); // nothing is written to it; its end is what counts
  child.once('exit', () => child.stdin?.destroy());
  relayLines(child.stdout, process.stdout);
  relayLines(child.stderr, process.stderr);
  return child;
}

/**
 * A program's output passed on a whole line at a time. Envoy writes its access log out in blocks of
 * many lines, larger than a pipe takes in one write: written straight to the output our Node
 * processes share, a block was cut mid-line by their lines, and the cluster's log stopped being one
 * JSON object per line. A line (well under the 4 KiB a pipe writes whole) is written at once.
 */
function relayLines(from: Readable | null, to: Writable): void {
  if (!from) return;
  createInterface({ input: from, crlfDelay: Infinity }).on('line', (line) => to.write(`${line}\n`));
}

/** Starts one Node process of ours. */
async function launch(name: string, script: string, env: Record<string, string>): Promise<ChildProcess> {
  const metricsPort = await freePort();
  metrics[name] = `http://127.0.0.1:${metricsPort}/metrics`;
  adminPorts[name] = metricsPort;
  // The same environment on every restart: same ports, same addresses, so peers find it again.
  return supervise({
    name,
    command: process.execPath,
    args: [...NODE_FLAGS, script],
    env: { ...tracingEnvOf(name), ADMIN_PORT: String(metricsPort), ...env },
    node: true,
  });
}

/**
 * A process's environment, with the launcher's OTEL_* variables as they are but two: no
 * OTEL_SERVICE_NAME, so that each process names its spans after its own service (edge, room…), and,
 * while spans are exported, the process's name (room-2…) as `service.instance.id`, to tell replicas apart.
 */
function tracingEnvOf(name: string): NodeJS.ProcessEnv {
  const { OTEL_SERVICE_NAME: _shared, ...env } = process.env;
  if (!tracingEnabled(config)) return env;
  const attributes = env.OTEL_RESOURCE_ATTRIBUTES ?? '';
  if (/(^|,)\s*service\.instance\.id\s*=/.test(attributes)) return env;
  return { ...env, OTEL_RESOURCE_ATTRIBUTES: [attributes, `service.instance.id=${name}`].filter((part) => part !== '').join(',') };
}

function supervise(spec: Pick<Supervised, 'name' | 'command' | 'args' | 'env' | 'node'>): ChildProcess {
  const supervised: Supervised = { ...spec, child: spawnChild(spec), startedAt: Date.now(), restarts: 0, nextDelayMs: RESTART_BACKOFF.initialMs };
  processes.push(supervised);
  watch(supervised);
  return supervised.child;
}

/** Envoy logs little at `warn`; at `info` it says some fifty lines at every start, which bury the cluster's own. */
function envoyLogLevel(level: z.output<typeof clusterEnv>['LOG_LEVEL']): string {
  const levels: Record<typeof level, string> = { trace: 'trace', debug: 'debug', info: 'warn', warn: 'warn', error: 'error', fatal: 'critical', silent: 'off' };
  return levels[level];
}

/**
 * Envoy on PORT in front of the edge processes and auth's pages, as the chart runs it: the
 * documents rendered into a temporary directory, a bootstrap from the route table, each upstream
 * process health-checked at `/readyz` on its ADMIN_PORT. Answers Envoy's admin URL once it is live.
 */
async function startEnvoy(edges: { port: number; name: string }[], auths: { port: number; name: string }[]): Promise<{ admin: string; bootstrap: string }> {
  if (!gateway || !envoyConfig) throw new Error('Envoy was not asked for');
  const { discoveryDocuments, envoyBootstrap, envoyYaml, writeDocuments } = gateway;
  envoyDir = await mkdtemp(join(tmpdir(), 'agent-room-envoy-'));
  const docsDir = join(envoyDir, 'docs');
  await writeDocuments(urls, discoveryDocuments(urls), docsDir);
  const adminPort = await freePort();
  const endpoint = ({ port: upstreamPort, name }: { port: number; name: string }) => ({
    host: '127.0.0.1',
    port: upstreamPort,
    healthCheckPort: adminPorts[name] as number,
  });
  const bootstrap = join(envoyDir, 'envoy.yaml');
  const rendered = envoyBootstrap({
    urls,
    docsDir,
    listen: { address: '0.0.0.0', port: config.PORT },
    admin: { address: '127.0.0.1', port: adminPort },
    edge: edges.map(endpoint),
    auth: auths.map(endpoint),
    quotaLimit: envoyConfig.QUOTA_PER_ADDRESS,
    rateLimit: { perSecond: envoyConfig.ENVOY_RATE_LIMIT_PER_SECOND, burst: envoyConfig.ENVOY_RATE_LIMIT_BURST },
    headersTimeoutMs: envoyConfig.HEADERS_TIMEOUT_MS,
    requestTimeoutMs: envoyConfig.REQUEST_TIMEOUT_MS,
    tracing,
  });
  await writeFile(bootstrap, envoyYaml(rendered, `Envoy bootstrap of \`npm run cluster -- --envoy\` for ${urls.siteUrl}, rendered from the route table.`));
  // One Envoy per cluster, and maybe another cluster's beside it: no shared memory for hot restarts.
  supervise({
    name: 'envoy',
    command: ENVOY_BIN,
    args: ['--config-path', bootstrap, '--disable-hot-restart', '--log-level', envoyLogLevel(config.LOG_LEVEL)],
    env: process.env,
    node: false,
  });
  const admin = `http://127.0.0.1:${adminPort}`;
  // Live once its listener is bound and every upstream had its first health check.
  await waitFor('envoy', async () => (await fetch(`${admin}/ready`, { signal: AbortSignal.timeout(1_000) }).catch(() => undefined))?.status === 200);
  return { admin, bootstrap };
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
      log.info(
        { process: name, pid: supervised.child.pid, restart: supervised.restarts },
        `${name} restarted (pid ${supervised.child.pid ?? '?'}, restart ${supervised.restarts})`,
      );
      watch(supervised);
    }, delayMs);
  });
}

/** One process of a gRPC service: `room`, `room-2`, … and where it listens. */
interface GrpcReplica {
  name: string;
  addr: string;
}

/** The one gRPC target naming every replica, which clients take in turn (round_robin) and retry across. */
function grpcTargetOf(replicas: readonly GrpcReplica[]): string {
  return replicas.length === 1 ? (replicas[0]?.addr ?? '') : `ipv4:${replicas.map((replica) => replica.addr).join(',')}`;
}

/**
 * Starts `count` processes of one gRPC service, the first named `service`, the others `service-2`,
 * `service-3`…, each on a port of its own with the environment `envOf` gives it, and resolves once
 * every one of them serves. They start together: each only waits on Redis and its peers' names.
 */
async function startGrpcReplicas(
  service: string,
  count: number,
  script: string,
  envOf: (replica: GrpcReplica) => Promise<Record<string, string>>,
  firstPort?: number,
): Promise<GrpcReplica[]> {
  const replicas: GrpcReplica[] = [];
  for (let i = 0; i < count; i += 1) {
    const replica = { name: i === 0 ? service : `${service}-${i + 1}`, addr: `127.0.0.1:${i === 0 && firstPort !== undefined ? firstPort : await freePort()}` };
    replicas.push(replica);
    await launch(replica.name, script, await envOf(replica));
  }
  await Promise.all(
    replicas.map(async ({ name, addr }) => {
      const health = new HealthChecker(addr);
      try {
        await waitFor(name, async () => (await health.check()) === 'SERVING');
      } finally {
        health.close();
      }
    }),
  );
  return replicas;
}

/** `room`, or `2 room processes`: how the ready line counts a service. */
function counted(service: string, replicas: readonly unknown[]): string {
  return replicas.length === 1 ? service : `${replicas.length} ${service} processes`;
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

/**
 * How long a process has after SIGTERM before it is killed: its own grace for in-flight work
 * (SHUTDOWN_GRACE_MS, 10 s by default) and a little more.
 */
const STOP_GRACE_MS = 15_000;
/** With the launcher's parent gone, nobody is left to send the second signal: the stop is cut short after this. */
const PARENT_GONE_STOP_MS = 10_000;

function runs(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

/** Stops every process started so far; `failure`, when given, is the last line printed (on stderr). */
async function stop(code: number, failure?: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  // Front to back: the router stops taking requests first, storage goes last.
  for (const supervised of [...processes].reverse()) {
    if (supervised.timer !== undefined) clearTimeout(supervised.timer);
    const { child, name } = supervised;
    if (runs(child)) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      const timer = setTimeout(() => {
        log.warn({ process: name, pid: child.pid }, `${name} did not stop within ${STOP_GRACE_MS / 1000} s of SIGTERM; killing it`);
        child.kill('SIGKILL');
      }, STOP_GRACE_MS);
      await exited;
      clearTimeout(timer);
    }
  }
  await redis?.stop();
  await postgres?.stop();
  if (envoyDir !== undefined) await rm(envoyDir, { recursive: true, force: true });
  if (failure === undefined) log.info('cluster stopped');
  else process.stderr.write(`${failure}\n`);
  process.exit(code);
}

/** The way out when a stop is not waited for: every process killed at once, then exit. */
function killAllNow(): never {
  for (const { child } of processes) if (runs(child)) child.kill('SIGKILL');
  for (const pid of [redis?.pid, postgres?.pid]) {
    if (pid === undefined) continue;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  process.exit(1);
}

// SIGHUP too: the terminal that ran `npm run cluster` was closed. A second signal does not wait.
for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
  process.on(signal, () => {
    if (!stopping) {
      void stop(0);
      return;
    }
    log.warn({ signal }, `second signal (${signal}); killing every process of the cluster now`);
    killAllNow();
  });
}
// Whatever ended the process that started us (npm, the bench, a test), kill -9 included, the cluster goes with it.
onParentGone(() => {
  if (stopping) return;
  log.warn('the process that started the cluster is gone; stopping the cluster');
  setTimeout(killAllNow, PARENT_GONE_STOP_MS).unref();
  void stop(0);
}, 'channel-or-ppid');

// What a person can fix is found before anything starts, and said in one line: a busy PORT, a
// Redis at REDIS_URL that does not answer or refuses us, a PostgreSQL at DATABASE_URL unreachable or too old.
try {
  await assertPortFree(config.PORT);
  // The router (or Envoy) listens on PORT last, after every other process has drawn its ports: none may draw it.
  reservePort(config.PORT);
  if (config.ROOM_GRPC_PORT !== undefined) reservePort(config.ROOM_GRPC_PORT);
  if (config.REDIS_URL !== undefined) await (await openRedis(config.REDIS_URL, 'cluster')).quit();
  if (config.DATABASE_URL !== undefined) await (await openDatabase({ url: config.DATABASE_URL })).close();
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
  let databaseUrl = config.DATABASE_URL;
  if (databaseUrl === undefined) {
    postgres = await startPostgresServer();
    databaseUrl = postgres.url;
    log.info({ database: databaseUrl }, `DATABASE_URL is not set: started a local PostgreSQL at ${databaseUrl} (not kept; set DATABASE_URL to use your own)`);
  }
  // Every process gets the same cursor secret, so a cursor works whichever process reads it (docs/decisions.md §6).
  const CURSOR_SECRET = config.CURSOR_SECRET ?? newCursorSecret();
  const common = { REDIS_URL: redisUrl, REDIS_KEY_PREFIX: config.REDIS_KEY_PREFIX, SITE_URL: urls.siteUrl, API_URL: urls.apiUrl, CURSOR_SECRET };

  // Each service's replicas share Redis, so any of them answers any call; its clients dial one target naming them all.
  const rooms = await startGrpcReplicas(
    'room',
    config.ROOM_REPLICAS,
    entry('@agentroom/room', './main.js'),
    async ({ addr }) => ({ ...common, ROOM_GRPC_ADDR: addr }),
    config.ROOM_GRPC_PORT,
  );
  const roomTarget = grpcTargetOf(rooms);

  // The record's replicas share one PostgreSQL: each serves reads and search, one at a time follows the room.
  const records = await startGrpcReplicas('record', config.RECORD_REPLICAS, entry('@agentroom/record', './main.js'), async ({ addr }) => ({
    ...common,
    RECORD_GRPC_ADDR: addr,
    ROOM_ADDR: roomTarget,
    DATABASE_URL: databaseUrl,
    ...(config.DATABASE_READ_URL === undefined ? {} : { DATABASE_READ_URL: config.DATABASE_READ_URL }),
  }));
  const recordTarget = grpcTargetOf(records);

  const messagings = await startGrpcReplicas('messaging', config.MESSAGING_REPLICAS, entry('@agentroom/messaging', './main.js'), async ({ addr }) => ({
    ...common,
    MESSAGING_GRPC_ADDR: addr,
    ROOM_ADDR: roomTarget,
  }));
  const messagingTarget = grpcTargetOf(messagings);

  // Delivery follows messaging's events and POSTs webhooks; edge calls it, and auth reads the webhooks for /account.
  const deliveries = await startGrpcReplicas('delivery', config.DELIVERY_REPLICAS, entry('@agentroom/delivery', './main.js'), async ({ addr }) => ({
    ...common,
    DELIVERY_GRPC_ADDR: addr,
    MESSAGING_ADDR: messagingTarget,
    ROOM_ADDR: roomTarget,
    WEBHOOKS_ALLOW_PRIVATE_TARGETS: String(config.WEBHOOKS_ALLOW_PRIVATE_TARGETS),
  }));
  const deliveryTarget = grpcTargetOf(deliveries);

  // Auth also serves the human pages over HTTP, on a port of each replica's own, which the router balances.
  const authHttpPorts = new Map<string, number>();
  const authReplicas = await startGrpcReplicas('auth', config.AUTH_REPLICAS, entry('@agentroom/auth', './main.js'), async ({ name, addr }) => {
    const httpPort = await freePort();
    authHttpPorts.set(name, httpPort);
    return {
      ...common,
      AUTH_GRPC_ADDR: addr,
      ROOM_ADDR: roomTarget,
      DELIVERY_ADDR: deliveryTarget,
      MESSAGING_ADDR: messagingTarget,
      RECORD_ADDR: recordTarget,
      AUTH_HTTP_PORT: String(httpPort),
      AUTH_HTTP_HOST: '127.0.0.1',
    };
  });
  const auths = authReplicas.map((replica) => ({ ...replica, httpPort: authHttpPorts.get(replica.name) ?? 0 }));
  const authAddr = auths[0]?.addr ?? '';
  const authTarget = grpcTargetOf(auths);

  const edgeUrls: string[] = [];
  const edges: { port: number; name: string }[] = [];
  for (let i = 0; i < config.EDGE_REPLICAS; i += 1) {
    const edgePort = await freePort();
    edges.push({ port: edgePort, name: `edge-${i + 1}` });
    await launch(`edge-${i + 1}`, entry('@agentroom/edge', './main.js'), {
      ...common,
      ROOM_ADDR: roomTarget,
      AUTH_ADDR: authTarget,
      MESSAGING_ADDR: messagingTarget,
      DELIVERY_ADDR: deliveryTarget,
      RECORD_ADDR: recordTarget,
      EDGE_PORT: String(edgePort),
      EDGE_HOST: '127.0.0.1',
    });
    edgeUrls.push(`http://127.0.0.1:${edgePort}`);
  }
  for (const url of edgeUrls) await waitFor(url, () => httpAnswers(url));

  const routerUrl = `http://127.0.0.1:${config.PORT}`;
  let envoy: { admin: string; bootstrap: string } | undefined;
  if (withEnvoy) {
    envoy = await startEnvoy(
      edges,
      auths.map((auth) => ({ port: auth.httpPort, name: auth.name })),
    );
  } else {
    const router = await launch('router', entry('@agentroom/gateway', './main.js'), {
      ...common,
      PORT: String(config.PORT),
      EDGE_URLS: edgeUrls.join(','),
      AUTH_URLS: auths.map((auth) => `http://127.0.0.1:${auth.httpPort}`).join(','),
    });
    // Its own word, not an answer on PORT: another process may hold PORT, and would answer too.
    await listening('router', router);
  }

  supervising = true;
  // The redis-server the launcher started is one of its processes too (the bench sums their CPU time).
  const pids = {
    ...Object.fromEntries(processes.map(({ name, child }) => [name, child.pid])),
    ...(redis?.pid === undefined ? {} : { 'redis-server': redis.pid }),
    ...(postgres?.pid === undefined ? {} : { postgres: postgres.pid }),
  };
  const traced = tracing
    ? `; Envoy's spans to ${tracing.host}:${tracing.port} over OTLP (${tracing.protocol}), ${tracing.samplingPerMillion / 10_000} % of new traces sampled`
    : '';
  // Load testers copy this: approved agents' tokens through auth's gRPC API, for a human registered at /signin.
  const privateTargets = config.WEBHOOKS_ALLOW_PRIVATE_TARGETS
    ? '; webhooks may target private and loopback addresses (WEBHOOKS_ALLOW_PRIVATE_TARGETS=true)'
    : '';
  const provision = `npm run agents -- provision --auth ${authAddr} --human "<a name registered at ${urls.siteUrl}/signin>" --count 200 --scopes posts:write,messages:write,messages:read --out load-tests/tokens.json`;
  log.info(
    {
      site: urls.siteUrl,
      api: urls.baseUrl,
      // The first replica of each service, for tools that dial one process; `replicas` names them all.
      room: rooms[0]?.addr,
      messaging: messagings[0]?.addr,
      delivery: deliveries[0]?.addr,
      record: records[0]?.addr,
      webhooksAllowPrivateTargets: config.WEBHOOKS_ALLOW_PRIVATE_TARGETS,
      auth: authAddr,
      auths: auths.map((auth) => auth.addr),
      replicas: Object.fromEntries(
        Object.entries({ room: rooms, record: records, messaging: messagings, delivery: deliveries, auth: auths }).map(([service, replicas]) => [
          service,
          replicas.map((replica) => replica.addr),
        ]),
      ),
      edges: edgeUrls,
      router: routerUrl,
      ...(envoy ? { envoy } : {}),
      redis: redisUrl,
      database: redactUrl(databaseUrl),
      ...(tracing
        ? { tracing: { protocol: tracing.protocol, receiver: `${tracing.host}:${tracing.port}`, samplingPercent: tracing.samplingPerMillion / 10_000 } }
        : {}),
      metrics,
      pids,
      provision,
    },
    `cluster ready at ${urls.siteUrl}: ${counted('room', rooms)}, ${counted('record', records)}, ${counted('messaging', messagings)}, ${counted('delivery', deliveries)}, ${counted('auth', auths)}, ${edgeUrls.length} edge process(es) and ${envoy ? `Envoy (${ENVOY_BIN}, admin ${envoy.admin})` : 'the router'}, on Redis and PostgreSQL${privateTargets}${traced}`,
  );
  log.info({ provision }, `tokens for load tests (load-tests/README.md): ${provision}`);
} catch (error) {
  const problem = startupProblem(error, { ports: { PORT: config.PORT } });
  if (problem === undefined) log.fatal({ err: error }, `cluster could not start: ${(error as Error).message}`);
  await stop(1, problem === undefined ? undefined : `cluster could not start: ${problem}`);
}
