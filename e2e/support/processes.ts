import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { freePort } from '@agentroom/kit/local';

/** The repository's root, where the commands run. */
export const root = fileURLToPath(new URL('../../', import.meta.url));

export interface Finished {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** A command of the repository, as a user runs it from its root, with `env` on top of ours; how it ended. */
export function runCommand(command: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<Finished> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr, ms: Date.now() - started }));
  });
}

export interface ClusterProcess<Ready> {
  child: ChildProcess;
  /** The launcher's `cluster ready` log line, parsed. */
  ready: Ready;
  /** Every line it and its processes printed so far (stdout by line, stderr by chunk). */
  lines: string[];
  /** SIGTERM, and resolves with its exit code once it has exited. */
  stop(): Promise<number | null>;
}

/**
 * Runs what `npm run cluster` runs once it has built (`node launcher/dist/cluster.js`, with `args`;
 * `npm test` builds first) on a free PORT with two edges and a local redis-server, and resolves
 * with its ready line. `env` adds to its environment (tracing's OTEL_* variables, say).
 */
export async function startClusterProcess<Ready>(args: string[], timeoutMs: number, env: NodeJS.ProcessEnv = {}): Promise<ClusterProcess<Ready>> {
  const port = await freePort();
  const child = spawn(process.execPath, ['launcher/dist/cluster.js', ...args], {
    cwd: root,
    env: { ...process.env, PORT: String(port), EDGE_REPLICAS: '2', REDIS_URL: '', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const ready = await new Promise<Ready>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`cluster not ready in time:\n${lines.join('\n')}`)), timeoutMs);
    let buffer = '';
    child.stdout.on('data', (chunk: Buffer) => {
      buffer += chunk.toString('utf8');
      let newline = buffer.indexOf('\n');
      while (newline >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + 1);
        lines.push(line);
        if (line.includes('"cluster ready')) {
          clearTimeout(timer);
          resolve(JSON.parse(line) as Ready);
        }
        newline = buffer.indexOf('\n');
      }
    });
    child.stderr.on('data', (chunk: Buffer) => lines.push(chunk.toString('utf8')));
    void exited.then((code) => reject(new Error(`cluster exited with ${code}:\n${lines.join('\n')}`)));
  });
  return {
    child,
    ready,
    lines,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}

export interface StartedProduct {
  child: ChildProcess;
  /** Resolves with its exit code once it has exited. */
  exited: Promise<number | null>;
  /** Every line it printed so far, stdout's and stderr's. */
  lines: string[];
}

/**
 * Runs what `npm start` runs once it has built (`node launcher/dist/start.js`; `npm test` builds
 * first) with `env` on top of ours, and resolves once it says `Agent Room is running`.
 */
export async function startEmbeddedProcess(env: NodeJS.ProcessEnv, timeoutMs = 60_000): Promise<StartedProduct> {
  const child = spawn(process.execPath, ['launcher/dist/start.js'], { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const lines: string[] = [];
  createInterface({ input: child.stderr }).on('line', (line) => lines.push(line));
  const running = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`npm start was not running within ${timeoutMs / 1000} s:\n${lines.slice(-20).join('\n')}`)), timeoutMs);
    createInterface({ input: child.stdout }).on('line', (line) => {
      lines.push(line);
      if (line.includes('Agent Room is running')) {
        clearTimeout(timer);
        resolve();
      }
    });
    void exited.then((code) => reject(new Error(`npm start exited with ${code}:\n${lines.slice(-20).join('\n')}`)));
  });
  // A product that did not come up is not left running behind the failed test.
  await running.catch((error: unknown) => {
    child.kill('SIGKILL');
    throw error;
  });
  return { child, exited, lines };
}
