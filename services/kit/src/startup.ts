import { createServer } from 'node:net';
import { ConfigError } from './config.js';
import type { Logger } from './log.js';

/**
 * A start-up failure that a person fixes (Redis unreachable, a binary missing…), not a bug: its
 * message is one line that says what is wrong and what to do, and it is printed without a stack.
 */
export class StartupError extends Error {
  override readonly name = 'StartupError';
}

export interface StartupContext {
  /** The variables that name the ports this process listens on (`{ PORT: 8080 }`), so a busy port names its variable. */
  ports?: Record<string, number | undefined>;
}

/**
 * The one line for a start-up failure a person can fix, or undefined for anything else (a bug,
 * whose stack is worth printing).
 */
export function startupProblem(error: unknown, context: StartupContext = {}): string | undefined {
  if (error instanceof StartupError || error instanceof ConfigError) return error.message;
  if (!(error instanceof Error)) return undefined;
  const { code, port, syscall } = error as NodeJS.ErrnoException & { port?: number };
  if (syscall !== 'listen' || port === undefined) return undefined;
  const variable = Object.entries(context.ports ?? {}).find(([, value]) => value === port)?.[0] ?? 'PORT';
  const other = port === 65535 ? port - 1 : port + 1;
  if (code === 'EADDRINUSE') return `port ${port} is in use: stop the other process or set ${variable}=<a free port> (e.g. ${variable}=${other})`;
  if (code === 'EACCES') return `port ${port} needs privileges this process lacks: set ${variable} to a port above 1023 (e.g. ${variable}=8080)`;
  if (code === 'EADDRNOTAVAIL') return `cannot listen on port ${port}: the address is not one of this machine's; check the host it binds to`;
  return undefined;
}

/**
 * Ends a process that could not start: a failure a person can fix is ONE line on stderr
 * (`<what> could not start: <problem>`) and exit status 1; anything else is logged with its stack.
 */
export function exitOnStartupFailure(what: string, error: unknown, log?: Logger, context: StartupContext = {}): never {
  const problem = startupProblem(error, context);
  if (problem !== undefined) {
    process.stderr.write(`${what} could not start: ${problem}\n`);
  } else if (log) {
    log.fatal({ err: error }, `${what} could not start: ${error instanceof Error ? error.message : String(error)}`);
  } else {
    process.stderr.write(`${what} could not start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  }
  process.exit(1);
}

/**
 * Fails (with the listen error, so `startupProblem` names the port) when `port` is taken, before
 * a launcher starts anything else: a busy port is then its only line. Port 0 is always free.
 */
export async function assertPortFree(port: number, host = '0.0.0.0'): Promise<void> {
  if (port === 0) return;
  const probe = createServer();
  await new Promise<void>((resolve, reject) => {
    probe.once('error', reject);
    probe.listen({ port, host }, () => probe.close(() => resolve()));
  });
}
