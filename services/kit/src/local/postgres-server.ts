import { spawn, spawnSync, type SpawnOptions } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exitingWithParent } from '../parent.js';
import { StartupError } from '../startup.js';
import { freePort } from './ports.js';

/** Debian's PostgreSQL 15: its programs are not on PATH, they are here. */
export const POSTGRES_BIN = '/usr/lib/postgresql/15/bin';

export const POSTGRES_INSTALL_HINT = `PostgreSQL 15 is not installed (no ${POSTGRES_BIN}/postgres). Install it with \`bash scripts/install-test-deps.sh\` (as root it runs \`apt-get install -y postgresql\`), or \`sudo apt-get install postgresql\`, or set DATABASE_URL to a PostgreSQL you run.`;

export interface LocalPostgres {
  /** `postgres://postgres@127.0.0.1:<port>/postgres`: trust authentication, loopback only. */
  url: string;
  port: number;
  /** The postmaster's process id (fault tests stop it with SIGKILL). */
  pid: number | undefined;
  /** Its data folder: the one given, or its own temp folder. */
  dir: string;
  stop(): Promise<void>;
}

export interface PostgresServerOptions {
  /** Listen here (e.g. to start it again where it was); a free port when unset. */
  port?: number;
  /**
   * Keep the data in this folder (made by initdb when it holds no cluster yet) and leave it there on
   * `stop`, so a server started again with the same `dir` has its data; a throwaway temp folder when unset.
   */
  dir?: string;
  /** Turn fsync off (and synchronous commit): faster, and a crash of the machine loses data. For tests only. */
  unsafeNoFsync?: boolean;
  /** Where initdb, postgres and pg_isready are; Debian's PostgreSQL 15 ({@link POSTGRES_BIN}) by default. */
  binDir?: string;
}

/** Runs a program to its end without blocking this process (initdb takes seconds): its exit status and what it printed. */
function run(command: string, args: readonly string[], options: SpawnOptions): Promise<{ status: number | null; output: string }> {
  return new Promise((resolve) => {
    let output = '';
    const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    const collect = (chunk: Buffer): void => void (output = (output + chunk.toString('utf8')).slice(-4_000));
    child.stdout?.on('data', collect);
    child.stderr?.on('data', collect);
    child.once('error', (error) => resolve({ status: null, output: error.message }));
    child.once('close', (status) => resolve({ status, output }));
  });
}

/** As root, PostgreSQL's programs run as the `postgres` system user (they refuse root). */
function runAs(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const uid = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
  if (uid.status !== 0 || gid.status !== 0) {
    throw new StartupError(
      'PostgreSQL refuses to run as root and this machine has no `postgres` system user: install PostgreSQL with `bash scripts/install-test-deps.sh`, which makes it.',
    );
  }
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

/**
 * Starts a PostgreSQL 15 on a loopback port: by default a throwaway one in a temp folder on a free
 * port (trust authentication, no Unix socket, UTF-8, the C locale). For tests, `npm run cluster`
 * and the fault tests (which stop it and start it again on the same port and folder). When this
 * process is root, initdb and postgres run as the `postgres` user, which then owns the folder.
 * Missing binaries fail with the command that installs them.
 */
export async function startPostgresServer(options: PostgresServerOptions = {}): Promise<LocalPostgres> {
  const bin = options.binDir ?? POSTGRES_BIN;
  if (!existsSync(join(bin, 'postgres')) || !existsSync(join(bin, 'initdb'))) throw new StartupError(POSTGRES_INSTALL_HINT);
  const user = runAs();
  const port = options.port ?? (await freePort());
  const ownDir = options.dir === undefined;
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'agentroom-postgres-'));
  mkdirSync(dir, { recursive: true });
  if (user) chownSync(dir, user.uid, user.gid);
  const spawnOptions: SpawnOptions = user ? { uid: user.uid, gid: user.gid } : {};
  const cleanUp = (): void => {
    if (ownDir) rmSync(dir, { recursive: true, force: true });
  };
  if (!existsSync(join(dir, 'PG_VERSION'))) {
    const init = await run(
      join(bin, 'initdb'),
      ['--pgdata', dir, '--username', 'postgres', '--auth', 'trust', '--encoding', 'UTF8', '--locale', 'C', '--no-instructions'],
      { ...spawnOptions, cwd: dir },
    );
    if (init.status !== 0) {
      cleanUp();
      throw new Error(`initdb failed in ${dir}: ${init.output.trim()}`);
    }
  }
  const settings = [
    ['listen_addresses', '127.0.0.1'],
    ['port', String(port)],
    // No Unix socket: its default folder (/var/run/postgresql) may not exist or be writable.
    ['unix_socket_directories', ''],
    ...(options.unsafeNoFsync
      ? [
          ['fsync', 'off'],
          ['synchronous_commit', 'off'],
          ['full_page_writes', 'off'],
        ]
      : []),
  ];
  // It stops by itself once this process is gone, however it died: no postgres outlives a killed test run or cluster.
  const program = exitingWithParent(join(bin, 'postgres'), ['-D', dir, ...settings.flatMap(([name, value]) => ['-c', `${name}=${value}`])]);
  let log = '';
  const child = spawn(program.command, program.args, { ...spawnOptions, cwd: dir, stdio: ['pipe', 'ignore', 'pipe'] });
  child.stdin?.on('error', () => undefined); // nothing is written to it; its end is what counts
  // Its last lines, to say why it did not start.
  child.stderr?.on('data', (chunk: Buffer) => (log = (log + chunk.toString('utf8')).slice(-2_000)));
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      child.stdin?.destroy();
      resolve();
    }),
  );
  const deadline = Date.now() + 30_000;
  // pg_isready answers 0 only once the server accepts connections (not while it starts or recovers).
  while ((await run(join(bin, 'pg_isready'), ['--quiet', '--host', '127.0.0.1', '--port', String(port), '--timeout', '1'], {})).status !== 0) {
    if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      await exited;
      cleanUp();
      throw new Error(`postgres did not start on port ${port}: ${log.trim().split('\n').slice(-3).join(' ') || 'no answer in 30 s'}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    pid: child.pid,
    dir,
    async stop() {
      // SIGINT is PostgreSQL's fast shutdown: clients are disconnected rather than waited for.
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
      await exited;
      cleanUp();
    },
  };
}
