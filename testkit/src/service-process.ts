import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { HealthChecker } from '@agentroom/kit/grpc';
import { freePort, NODE_FLAGS } from '@agentroom/kit/local';

const READY_TIMEOUT_MS = 20_000;
const STOP_GRACE_MS = 5_000;

/** Another service of this repository, running as its own process, reached only over gRPC. */
export interface ServiceProcess {
  /** `127.0.0.1:<port>`, where its gRPC server listens. */
  address: string;
  port: number;
  /** Its process id: a test may kill it outright (SIGKILL), as a crash would. */
  pid: number;
  /** Its log lines (JSON, one per line), as it wrote them to stdout. */
  lines: string[];
  /** SIGTERM, then SIGKILL if it has not exited within a few seconds. */
  stop(): Promise<void>;
}

export interface ServiceProcessOptions {
  /** The service's folder under `services/`, e.g. `room`; its built `dist/main.js` is started. */
  service: string;
  /** The variable its gRPC address is read from, e.g. `ROOM_GRPC_ADDR`; a free loopback port is put there. */
  addressVariable: string;
  env?: Record<string, string>;
}

/**
 * Starts a built service the way a deployment does (its own `main.js`, configured by environment)
 * and resolves once its gRPC health check answers SERVING. Tests of one service use it to talk to
 * another over real gRPC without importing its code.
 */
export async function startServiceProcess(options: ServiceProcessOptions): Promise<ServiceProcess> {
  const script = fileURLToPath(new URL(`../../services/${options.service}/dist/main.js`, import.meta.url));
  const port = await freePort();
  const address = `127.0.0.1:${port}`;
  const child: ChildProcess = spawn(process.execPath, [...NODE_FLAGS, script], {
    env: { ...process.env, ...options.env, [options.addressVariable]: address },
    // The IPC channel is unused but for its close: the service stops by itself once this process is gone, however it died.
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const lines: string[] = [];
  const errors: string[] = [];
  if (child.stdout) createInterface({ input: child.stdout }).on('line', (line) => lines.push(line));
  if (child.stderr) createInterface({ input: child.stderr }).on('line', (line) => errors.push(line));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let gone = false;
  void exited.then(() => (gone = true));

  const health = new HealthChecker(address);
  try {
    const deadline = Date.now() + READY_TIMEOUT_MS;
    while ((await health.check()) !== 'SERVING') {
      if (gone)
        throw new Error(
          `${options.service} (${script}) exited before serving: ${[...errors, ...lines].slice(-5).join(' | ') || 'no output; run npm run build'}`,
        );
      if (Date.now() > deadline) throw new Error(`${options.service} did not serve at ${address} within ${READY_TIMEOUT_MS / 1000} s`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  } finally {
    health.close();
  }

  return {
    address,
    port,
    pid: child.pid ?? 0,
    lines,
    async stop() {
      if (gone) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
      await exited;
      clearTimeout(timer);
    },
  };
}
