import { describe, expect, it } from 'vitest';
import { migrate, type Migration, MIGRATIONS } from '../src/migrations.js';
import { openPGlite } from '../src/db.js';
import type { NewAuditEntry } from '../src/safety.js';
import { SqlSafetyStore } from '../src/safety.js';
import { BACKENDS, useBackends } from './support.js';

// Reports and the audit (migration 4, docs/decisions.md §44), held by both databases the record runs on.
const database = useBackends();

function entry(id: string, extra: Partial<NewAuditEntry> = {}): NewAuditEntry {
  return {
    id,
    actorKind: 'moderator',
    actorId: 'h_moderator1',
    action: 'remove_post',
    agentId: 'a_spammer01',
    postId: '1765000000000-0',
    reason: 'spam',
    detail: JSON.stringify({ report_id: 'rep_1', reporter: 'a_victim001' }),
    public: true,
    ...extra,
  };
}

describe.each(BACKENDS)('reports and the audit on %s', (name) => {
  const fresh = async (): Promise<SqlSafetyStore> => {
    const db = database(name);
    await db.query('TRUNCATE reports, audit');
    return new SqlSafetyStore(db);
  };
  const report = (reporter: string, callKey: string, agentId = 'a_spammer01', postId = '') => ({
    reporterAgentId: reporter,
    callKey,
    postId,
    agentId,
    reason: 'spam',
    note: 'it posts the same link again and again',
  });

  it('files a report once per reporter and call key, open, and reads it back by id', async () => {
    const store = await fresh();
    const first = await store.createReport(report('a_victim001', 'k1', 'a_spammer01', '1765000000000-0'));
    expect(first).toMatchObject({
      reporterAgentId: 'a_victim001',
      postId: '1765000000000-0',
      agentId: 'a_spammer01',
      reason: 'spam',
      note: 'it posts the same link again and again',
      status: 'open',
      resolvedAt: '',
      resolution: '',
      resolvedBy: '',
    });
    expect(first.id).toMatch(/^rep_[A-Za-z0-9_-]{16}$/);
    expect(Date.parse(first.createdAt)).toBeGreaterThan(Date.now() - 60_000);
    // The same call again answers the first report, whatever it says now; another reporter's same key is another report.
    expect(await store.createReport({ ...report('a_victim001', 'k1'), note: 'changed' })).toEqual(first);
    const other = await store.createReport(report('a_victim002', 'k1'));
    expect(other.id).not.toBe(first.id);
    expect(await store.getReport(first.id)).toEqual(first);
    expect(await store.getReport('rep_none')).toBeUndefined();
  });

  it('lists the open queue oldest first with its total, and every report against an agent newest first, a page at a time', async () => {
    const store = await fresh();
    const made = [];
    for (let i = 0; i < 5; i += 1) made.push(await store.createReport(report(`a_victim00${i}`, 'k', i % 2 === 0 ? 'a_spammer01' : 'a_other0001')));
    const ids = made.map((r) => r.id);
    await store.resolveReport(ids[1] ?? '', { status: 'dismissed', resolution: 'not spam', resolvedBy: 'h_moderator1' });

    const first = await store.listReports({ open: true, limit: 2 });
    expect(first.items.map((r) => r.id)).toEqual([ids[0], ids[2]]);
    expect(first.hasMore).toBe(true);
    expect(first.openTotal).toBe(4);
    const second = await store.listReports({ open: true, limit: 2, after: first.items.at(-1)?.seq ?? 0 });
    expect(second.items.map((r) => r.id)).toEqual([ids[3], ids[4]]);
    expect(second.hasMore).toBe(false);

    const against = await store.listReports({ open: false, agentId: 'a_other0001', limit: 10 });
    expect(against.items.map((r) => r.id)).toEqual([ids[3], ids[1]]);
    expect(against.items[1]?.status).toBe('dismissed');
    const all = await store.listReports({ open: false, limit: 3 });
    expect(all.items.map((r) => r.id)).toEqual([ids[4], ids[3], ids[2]]);
    expect((await store.listReports({ open: false, limit: 3, after: all.items.at(-1)?.seq ?? 0 })).items.map((r) => r.id)).toEqual([ids[1], ids[0]]);
  });

  it('closes a report once: the first resolution stands, and an unknown id is undefined', async () => {
    const store = await fresh();
    const open = await store.createReport(report('a_victim001', 'k1'));
    const closed = await store.resolveReport(open.id, { status: 'actioned', resolution: 'post removed', resolvedBy: 'h_moderator1' });
    expect(closed).toMatchObject({ id: open.id, status: 'actioned', resolution: 'post removed', resolvedBy: 'h_moderator1' });
    expect(closed?.resolvedAt).not.toBe('');
    expect(await store.resolveReport(open.id, { status: 'dismissed', resolution: 'changed my mind', resolvedBy: 'h_other' })).toEqual(closed);
    expect(await store.resolveReport('rep_none', { status: 'dismissed', resolution: '', resolvedBy: 'h_moderator1' })).toBeUndefined();
    expect((await store.listReports({ open: true, limit: 10 })).openTotal).toBe(0);
  });

  it('appends an audit entry once per id and lists the audit newest first, by agent (acted on or acting) a page at a time', async () => {
    const store = await fresh();
    const appended = await store.appendAudit(entry('e1', { at: '2026-01-02T03:04:05.678Z' }));
    expect(appended).toMatchObject({ ...entry('e1'), at: '2026-01-02T03:04:05.678Z' });
    // A repeat of the id appends nothing, and answers the first.
    expect(await store.appendAudit(entry('e1', { reason: 'changed' }))).toEqual(appended);
    await store.appendAudit(entry('e2', { actorKind: 'agent', actorId: 'a_victim001', action: 'create_report', public: false, postId: '', detail: '' }));
    await store.appendAudit(entry('e3', { actorKind: 'agent', actorId: 'a_spammer01', action: 'block_agent', agentId: 'a_victim001', public: false }));
    const now = await store.appendAudit(entry('e4', { agentId: 'a_other0001', action: 'suspend_agent', detail: '{"until":"2026-02-01T00:00:00.000Z"}' }));
    expect(Date.parse(now.at)).toBeGreaterThan(Date.now() - 60_000);

    const page = await store.listAudit({ publicOnly: false, limit: 3 });
    expect(page.items.map((e) => e.id)).toEqual(['e4', 'e3', 'e2']);
    expect(page.hasMore).toBe(true);
    expect((await store.listAudit({ publicOnly: false, limit: 3, before: page.items.at(-1)?.seq ?? 0 })).items.map((e) => e.id)).toEqual(['e1']);
    // About the spammer: acted on (e1, e2) or acting (e3).
    expect((await store.listAudit({ publicOnly: false, agentId: 'a_spammer01', limit: 10 })).items.map((e) => e.id)).toEqual(['e3', 'e2', 'e1']);
  });

  it('lists the public log: public entries only, never who acted nor anything naming a reporter', async () => {
    const store = await fresh();
    await store.appendAudit(entry('e1'));
    await store.appendAudit(entry('e2', { actorKind: 'agent', actorId: 'a_victim001', action: 'create_report', public: false }));
    await store.appendAudit(entry('e3', { action: 'suspend_agent', detail: '{"until":"2026-02-01T00:00:00.000Z","report_id":"rep_1"}' }));
    await store.appendAudit(entry('e4', { detail: 'not json, naming a_victim001' }));
    const log = await store.listAudit({ publicOnly: true, limit: 10 });
    expect(log.items.map((e) => e.id)).toEqual(['e4', 'e3', 'e1']);
    for (const shown of log.items) expect(shown.actorId).toBe('');
    expect(log.items.map((e) => e.detail)).toEqual(['', '{"until":"2026-02-01T00:00:00.000Z"}', '']);
    expect(JSON.stringify(log)).not.toMatch(/a_victim001|h_moderator1|rep_1/);
    // By agent, the public log matches the agent acted on only (it names no actor).
    expect((await store.listAudit({ publicOnly: true, agentId: 'h_moderator1', limit: 10 })).items).toEqual([]);
    expect((await store.listAudit({ publicOnly: true, agentId: 'a_spammer01', limit: 10 })).items).toHaveLength(3);
  });
});

it('applies a migration numbered before one already applied: a database that has 4 takes 3 when it arrives', async () => {
  const db = await openPGlite();
  try {
    const without = MIGRATIONS.filter((migration) => migration.version !== 3);
    await migrate(db, without);
    const three: Migration = { version: 3, name: 'arrives later', statements: ['CREATE TABLE later (id integer)'] };
    const all = [...without, three].sort((a, b) => a.version - b.version);
    expect(await migrate(db, all)).toEqual([3]);
    const versions = await db.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version');
    expect(versions.map((row) => row.version)).toEqual(all.map((migration) => migration.version));
  } finally {
    await db.close();
  }
}, 60_000);
