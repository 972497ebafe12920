import { mkdirSync, readdirSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import { StartupError } from '@agentroom/kit/process';
import { unavailable } from '@agentroom/kit/problems';
import pg from 'pg';
import { DATA_DIR_LOCK, lockDataDir } from './data-dir.js';
import { pgliteTemplate } from './pglite-template.js';

/** Something SQL runs on: the database, or one transaction of it. Parameters are always bound ($1, $2, …), never spliced. */
export interface Queryable {
  query<R>(sql: string, params?: readonly unknown[]): Promise<R[]>;
}

/**
 * The record's database, the same SQL whichever it is: a real PostgreSQL through a `pg` pool, or
 * PGlite (PostgreSQL compiled to WASM, in this process: in memory, or in a folder).
 */
export interface Database extends Queryable {
  readonly kind: 'postgres' | 'pglite';
  /** Runs `work` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(work: (tx: Queryable) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/** The oldest PostgreSQL the record runs on: 15, the major Debian 12 ships, which tests and CI run. */
export const POSTGRES_MIN_VERSION_NUM = 150_000;

/** How long one statement may run before PostgreSQL cancels it (ms): no query of the record runs unbounded. */
export const STATEMENT_TIMEOUT_MS = 5_000;

export interface PostgresOptions {
  /** Connections of the pool; 10 by default. */
  max?: number;
  statementTimeoutMs?: number;
  /** Words for errors: which variable named the URL (`DATABASE_URL`, `DATABASE_READ_URL`). */
  variable?: string;
}

/** A database URL as it may be shown: without its password. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(a URL that does not parse)';
  }
}

/** The one line for a server too old for the record, or undefined when its version will do. */
export function serverTooOld(versionNum: number, url: string, variable = 'DATABASE_URL'): string | undefined {
  if (versionNum >= POSTGRES_MIN_VERSION_NUM) return undefined;
  const major = versionNum >= 100_000 ? Math.floor(versionNum / 10_000) : `${Math.floor(versionNum / 10_000)}.${Math.floor(versionNum / 100) % 100}`;
  return `the PostgreSQL at ${redactUrl(url)} is version ${major}; the record needs PostgreSQL 15 or newer: upgrade it, or set ${variable} to a newer one`;
}

/** The one line for a PostgreSQL that could not be reached or refused us, from the driver's error. */
export function unreachable(error: unknown, url: string, variable = 'DATABASE_URL'): string {
  const where = redactUrl(url);
  const { code, message } = error as { code?: string; message?: string };
  const why = message?.split('\n')[0] ?? String(error);
  if (code === '28P01' || code === '28000') return `the PostgreSQL at ${where} refused the credentials (${why}): correct the user and password in ${variable}`;
  if (code === '3D000') return `the PostgreSQL at ${where} has no such database (${why}): create it, or correct ${variable}`;
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return `the host of ${variable}=${where} is not found (${why}): correct ${variable}`;
  // As for REDIS_URL: the embedded default needs no server at all.
  const orUnset = variable === 'DATABASE_URL' ? ', or unset it to keep the record in this process (PGlite)' : '';
  return `PostgreSQL at ${where} is unreachable (${why || code || 'no answer'}): start it, set ${variable} to one that runs${orUnset}`;
}

/**
 * SQLSTATEs that say the server cannot answer now rather than that the statement is wrong: a
 * connection exception (class 08), shutting down or starting up (57P01-57P03), too many
 * connections (53300), and a statement cancelled by `statement_timeout` (57014).
 */
const UNAVAILABLE_CODES = new Set(['57014', '57P01', '57P02', '57P03', '53300']);
/** The driver's words for a server it cannot reach or lost (these errors carry no SQLSTATE). */
const UNAVAILABLE_MESSAGES =
  /ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|EHOSTUNREACH|ENOTFOUND|EAI_AGAIN|Connection terminated|timeout exceeded when trying to connect|connection error|Client was closed/;

/**
 * A failure of PostgreSQL to answer, as the `unavailable` problem (503 with Retry-After where it
 * reaches a client, as for Redis), with the driver's error as its cause; any other error unchanged.
 */
export function asUnavailable(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  const code = (error as { code?: unknown }).code;
  const known = typeof code === 'string' && (UNAVAILABLE_CODES.has(code) || code.startsWith('08'));
  if (!known && !UNAVAILABLE_MESSAGES.test(error.message)) return error;
  const problem = unavailable(code === '57014' ? 'The record did not answer in time.' : 'The record’s database did not answer.');
  return Object.assign(problem, { cause: error });
}

class PostgresDatabase implements Database {
  readonly kind = 'postgres';

  constructor(private readonly pool: pg.Pool) {}

  async query<R>(sql: string, params: readonly unknown[] = []): Promise<R[]> {
    try {
      return (await this.pool.query(sql, params as unknown[])).rows as R[];
    } catch (error) {
      throw asUnavailable(error);
    }
  }

  async transaction<T>(work: (tx: Queryable) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (error) {
      throw asUnavailable(error);
    }
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      const result = await work({
        query: async <R>(sql: string, params: readonly unknown[] = []) => (await client.query(sql, params as unknown[])).rows as R[],
      });
      await client.query('COMMIT');
      return result;
    } catch (error) {
      // A connection that fails to roll back is not handed to the next caller.
      await client.query('ROLLBACK').catch((rollback: unknown) => (broken = rollback instanceof Error ? rollback : new Error(String(rollback))));
      throw asUnavailable(error);
    } finally {
      client.release(broken);
    }
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

/**
 * Opens a pool on a real PostgreSQL and checks it once: reachable, and 15 or newer. Either failure
 * is a StartupError of one line naming the URL (never its password). Every statement of the pool
 * runs under `statement_timeout`.
 */
export async function openPostgres(url: string, options: PostgresOptions = {}): Promise<Database> {
  const variable = options.variable ?? 'DATABASE_URL';
  if (!/^postgres(ql)?:\/\//.test(url)) throw new StartupError(`${variable} is not a PostgreSQL URL: use one like postgres://user:password@host:5432/database`);
  const pool = new pg.Pool({
    connectionString: url,
    max: options.max ?? 10,
    connectionTimeoutMillis: 5_000,
    statement_timeout: options.statementTimeoutMs ?? STATEMENT_TIMEOUT_MS,
    // Why a connection is open, for pg_stat_activity.
    application_name: 'agentroom-record',
  });
  // An idle connection that breaks (the server restarted) is dropped from the pool; the next query opens another.
  pool.on('error', () => undefined);
  let versionNum: number;
  try {
    const [row] = (await pool.query<{ server_version_num: string }>('SHOW server_version_num')).rows;
    versionNum = Number(row?.server_version_num);
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw new StartupError(unreachable(error, url, variable));
  }
  const tooOld = serverTooOld(versionNum, url, variable);
  if (tooOld !== undefined) {
    await pool.end().catch(() => undefined);
    throw new StartupError(tooOld);
  }
  return new PostgresDatabase(pool);
}

class PGliteDatabase implements Database {
  readonly kind = 'pglite';

  constructor(
    private readonly db: PGlite,
    private readonly unlock: () => void = () => undefined,
  ) {}

  async query<R>(sql: string, params: readonly unknown[] = []): Promise<R[]> {
    return (await this.db.query<R>(sql, params as unknown[])).rows;
  }

  transaction<T>(work: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.db.transaction((tx) =>
      work({ query: async <R>(sql: string, params: readonly unknown[] = []) => (await tx.query<R>(sql, params as unknown[])).rows }),
    );
  }

  async close(): Promise<void> {
    try {
      await this.db.close();
    } finally {
      this.unlock();
    }
  }
}

/**
 * Opens PGlite in this process: in memory when `dataDir` is unset (gone with the process), or in
 * that folder (made when missing), so the record survives a restart. One process at a time may
 * open a folder: it is locked until `close` (data-dir.ts), and a second process is refused.
 */
export async function openPGlite(dataDir?: string): Promise<Database> {
  const failed = (error: unknown): StartupError =>
    new StartupError(
      `PGlite could not open ${dataDir === undefined ? 'its in-memory database' : `DATA_DIR ${dataDir}`} (${error instanceof Error ? error.message.split('\n')[0] : String(error)}): check that the folder is writable`,
    );
  let unlock = (): void => undefined;
  if (dataDir !== undefined) {
    try {
      mkdirSync(dataDir, { recursive: true });
    } catch (error) {
      throw failed(error);
    }
    // Refused here, with the process that holds it, before PGlite touches a file.
    unlock = lockDataDir(dataDir);
  }
  try {
    // In memory or in a new folder (its lock aside), the build's initdb'd folder is loaded instead of running initdb (docs/decisions.md §39).
    const fresh = dataDir === undefined || readdirSync(dataDir).every((name) => name === DATA_DIR_LOCK);
    const template = fresh ? pgliteTemplate() : undefined;
    const db =
      template === undefined ? await PGlite.create(dataDir) : await PGlite.create({ ...(dataDir === undefined ? {} : { dataDir }), loadDataDir: template });
    // Set for parity with PostgreSQL; PGlite runs one statement at a time and may not enforce it.
    await db.query(`SET statement_timeout = ${STATEMENT_TIMEOUT_MS}`);
    return new PGliteDatabase(db, unlock);
  } catch (error) {
    unlock();
    throw failed(error);
  }
}

/** The record's database as the configuration names it: `url` (DATABASE_URL) for PostgreSQL, else PGlite in `dataDir` or memory. */
export function openDatabase(options: { url?: string; dataDir?: string; variable?: string }): Promise<Database> {
  return options.url === undefined || options.url === ''
    ? openPGlite(options.dataDir)
    : openPostgres(options.url, options.variable === undefined ? {} : { variable: options.variable });
}
