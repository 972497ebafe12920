import { spawnSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { freePort, type LocalPostgres, POSTGRES_INSTALL_HINT, startPostgresServer } from '@agentroom/kit/local';
import { StartupError } from '@agentroom/kit/process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, openPostgres, serverTooOld } from '../src/db.js';
import { type Migration, migrate, MIGRATIONS } from '../src/migrations.js';
import { openRecordStore, SqlRecordStore } from '../src/store-sql.js';
import { post } from './support.js';

// What only a real PostgreSQL shows: replicas migrating at once, the one-line start-up errors,
// statement timeouts, a read replica, and the throwaway server tests and the cluster start.
let server: LocalPostgres;
let admin: Database;
let databases = 0;

beforeAll(async () => {
  server = await startPostgresServer({ unsafeNoFsync: true });
  admin = await openPostgres(server.url);
}, 60_000);

afterAll(async () => {
  await admin?.close();
  await server?.stop();
});

/** The URL of a new, empty database on the server. */
async function newDatabase(): Promise<string> {
  databases += 1;
  const name = `record_test_${databases}`;
  await admin.query(`CREATE DATABASE ${name}`);
  return server.url.replace(/\/postgres$/, `/${name}`);
}

describe('migrations', () => {
  it('are applied once when two replicas start together', async () => {
    const url = await newDatabase();
    const [one, two] = await Promise.all([openPostgres(url), openPostgres(url)]);
    // A slow step, so that the second migrator arrives while the first is still at work; and a step that must run once.
    const migrations: Migration[] = [
      ...MIGRATIONS,
      { version: 1001, name: 'slow', statements: ['SELECT pg_sleep(0.3)', 'CREATE TABLE runs (at timestamptz DEFAULT now())'] },
      { version: 1002, name: 'counted', statements: ['INSERT INTO runs DEFAULT VALUES'] },
    ];
    const applied = await Promise.all([migrate(one, migrations), migrate(two, migrations)]);
    const versions = migrations.map((migration) => migration.version);
    expect(applied.map((list) => list.length).sort()).toEqual([0, versions.length]);
    expect(applied.flat()).toEqual(versions);
    expect(await one.query('SELECT count(*)::integer AS n FROM runs')).toEqual([{ n: 1 }]);
    expect((await one.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version')).map((row) => row.version)).toEqual(versions);
    // Started again, nothing is left to apply.
    expect(await migrate(two, migrations)).toEqual([]);
    await Promise.all([one.close(), two.close()]);
  });

  it('let two record stores open the same new database at once', async () => {
    const url = await newDatabase();
    const stores = await Promise.all([openRecordStore({ url }), openRecordStore({ url })]);
    await stores[0].archive([post('1-0', 'from the first replica')]);
    expect((await stores[1].getPost('1-0'))?.text).toBe('from the first replica');
    await Promise.all(stores.map((store) => store.close()));
  });
});

describe('one-line start-up errors', () => {
  it('names a PostgreSQL that is unreachable by its URL, without the password', async () => {
    const url = `postgres://record:s3cret-pw@127.0.0.1:${await freePort()}/agentroom`;
    const error = await openPostgres(url).then(
      () => undefined,
      (failure: unknown) => failure,
    );
    expect(error).toBeInstanceOf(StartupError);
    const { message } = error as StartupError;
    expect(message).toMatch(
      /^PostgreSQL at postgres:\/\/record:\*\*\*@127\.0\.0\.1:\d+\/agentroom is unreachable \(.*ECONNREFUSED.*\): start it, set DATABASE_URL to one that runs, or unset it to keep the record in this process \(PGlite\)$/,
    );
    expect(message).not.toContain('s3cret');
    expect(message).not.toContain('\n');
  });

  it('names a host that is not found, and a URL that is not PostgreSQL’s', async () => {
    const error = await openPostgres('postgres://record:pw@no-such-host.invalid:5432/x', { variable: 'DATABASE_READ_URL' }).catch(
      (failure: unknown) => failure,
    );
    expect((error as Error).message).toMatch(
      /^the host of DATABASE_READ_URL=postgres:\/\/record:\*\*\*@no-such-host\.invalid:5432\/x is not found \(.*\): correct DATABASE_READ_URL$/,
    );
    await expect(openPostgres('redis://127.0.0.1:6379')).rejects.toThrow(
      new StartupError('DATABASE_URL is not a PostgreSQL URL: use one like postgres://user:password@host:5432/database'),
    );
  });

  it('names a database that does not exist', async () => {
    const error = await openPostgres(server.url.replace(/\/postgres$/, '/nowhere'), { variable: 'DATABASE_READ_URL' }).catch((failure: unknown) => failure);
    expect((error as Error).message).toMatch(/has no such database .*: create it, or correct DATABASE_READ_URL$/);
  });

  it('refuses a server older than 15 in one line, and takes 15 itself', async () => {
    expect(serverTooOld(140_011, 'postgres://u:pw@db:5432/x')).toBe(
      'the PostgreSQL at postgres://u:***@db:5432/x is version 14; the record needs PostgreSQL 15 or newer: upgrade it, or set DATABASE_URL to a newer one',
    );
    expect(serverTooOld(90_624, 'postgres://db/x')).toContain('is version 9.6;');
    expect(serverTooOld(150_000, 'postgres://db/x')).toBeUndefined();
    const [row] = await admin.query<{ server_version_num: string }>('SHOW server_version_num');
    expect(Number(row?.server_version_num)).toBeGreaterThanOrEqual(150_000);
  });
});

describe('bounds and outages', () => {
  it('cancels a statement that runs past the statement timeout (5 s by default), as the record unavailable', async () => {
    expect(await admin.query('SHOW statement_timeout')).toEqual([{ statement_timeout: '5s' }]);
    const quick = await openPostgres(server.url, { statementTimeoutMs: 200 });
    const started = Date.now();
    const timedOut = { slug: 'unavailable', detail: 'The record did not answer in time.', cause: expect.objectContaining({ code: '57014' }) };
    await expect(quick.query('SELECT pg_sleep(3)')).rejects.toMatchObject(timedOut);
    expect(Date.now() - started).toBeLessThan(2_500);
    await expect(quick.transaction((tx) => tx.query('SELECT pg_sleep(3)'))).rejects.toMatchObject(timedOut);
    // A mistake in SQL stays what it is: a bug, not an outage.
    await expect(quick.query('SELECT * FROM no_such_table')).rejects.toMatchObject({ code: '42P01' });
    await quick.close();
  });

  it('answers unavailable, never an internal error, while PostgreSQL is stopped, and answers again once it is back', async () => {
    const dir = `${server.dir}-outage`;
    const first = await startPostgresServer({ dir, unsafeNoFsync: true });
    const db = await openPostgres(first.url);
    await migrate(db);
    const store = new SqlRecordStore({ write: db });
    await store.archive([post('1-0', 'before the outage')]);
    await first.stop();
    const outage = { slug: 'unavailable', status: 503 };
    await expect(store.getPost('1-0')).rejects.toMatchObject(outage);
    await expect(store.archive([post('2-0', 'during the outage')])).rejects.toMatchObject(outage);
    await expect(store.search({ terms: [{ kind: 'words', words: ['outage'], exclude: false }], sort: 'newest', limit: 5 })).rejects.toMatchObject(outage);
    await expect(store.acquireLease('one', 1_000)).rejects.toMatchObject(outage);
    const back = await startPostgresServer({ dir, port: first.port, unsafeNoFsync: true });
    expect((await store.getPost('1-0'))?.text).toBe('before the outage');
    expect(await store.archive([post('2-0', 'after the outage')])).toBe(1);
    await store.close();
    await back.stop();
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);
});

describe('a read replica', () => {
  it('serves reads and searches, while writes, the lease and the position go to the primary', async () => {
    const [primary, replica] = await Promise.all([newDatabase(), newDatabase()]);
    const [write, read] = await Promise.all([openPostgres(primary), openPostgres(replica)]);
    await Promise.all([migrate(write), migrate(read)]);
    const store = new SqlRecordStore({ write, read });
    const direct = new SqlRecordStore({ write: read });
    await store.archive([post('1-0', 'written to the primary')]);
    // Not on the "replica" (a separate database here): the store did not read the primary.
    expect(await store.getPost('1-0')).toBeUndefined();
    await direct.archive([post('2-0', 'only on the replica')]);
    expect((await store.getPost('2-0'))?.text).toBe('only on the replica');
    expect((await store.listPosts(10)).items.map((item) => item.id)).toEqual(['2-0']);
    expect((await store.search({ terms: [{ kind: 'words', words: ['replica'], exclude: false }], sort: 'newest', limit: 10 })).items).toHaveLength(1);
    expect(await store.acquireLease('one', 10_000)).toBe(true);
    expect(await store.advancePosition('one', '1-0')).toBe(true);
    expect(await new SqlRecordStore({ write }).position()).toBe('1-0');
    expect(await direct.position()).toBeUndefined();
    await store.close();
  });
});

describe('the throwaway PostgreSQL', () => {
  it('runs as the postgres user when started by root, on loopback, and leaves nothing behind', async () => {
    const local = await startPostgresServer();
    const user = spawnSync('ps', ['-o', 'user=', '-p', String(local.pid)], { encoding: 'utf8' }).stdout.trim();
    expect(user).toBe(process.getuid?.() === 0 ? 'postgres' : (process.env.USER ?? user));
    const db = await openPostgres(local.url);
    expect(await db.query("SELECT current_setting('listen_addresses') AS listen, current_setting('fsync') AS fsync")).toEqual([
      { listen: '127.0.0.1', fsync: 'on' },
    ]);
    await db.close();
    await local.stop();
    expect(existsSync(local.dir)).toBe(false);
    expect(spawnSync('kill', ['-0', String(local.pid)]).status).not.toBe(0);
  });

  it('keeps its data in a folder it is given, across a stop and a start', async () => {
    const dir = `${server.dir}-kept`;
    const first = await startPostgresServer({ dir, unsafeNoFsync: true });
    let db = await openPostgres(first.url);
    await db.query('CREATE TABLE kept (word text)');
    await db.query("INSERT INTO kept VALUES ('still here')");
    await db.close();
    await first.stop();
    const again = await startPostgresServer({ dir, port: first.port });
    db = await openPostgres(again.url);
    expect(await db.query('SELECT word FROM kept')).toEqual([{ word: 'still here' }]);
    await db.close();
    await again.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('says how to install PostgreSQL when its programs are missing', async () => {
    await expect(startPostgresServer({ binDir: '/nonexistent/bin' })).rejects.toThrow(new StartupError(POSTGRES_INSTALL_HINT));
    expect(POSTGRES_INSTALL_HINT).toContain('bash scripts/install-test-deps.sh');
  });
});
