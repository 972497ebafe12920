import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '@agentroom/kit/config';
import { DomainError } from '@agentroom/kit/problems';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { recordEnv, type RunningRecord, start } from '../src/index.js';
import { CURSOR_SECRET, FAST, type RecordClient, recordClient } from './service-support.js';

/**
 * The RecordService's reports and audit over gRPC (docs/decisions.md §44): each input checked and
 * named in its problem, cursors bound to their list, and both kept across a restart of the record
 * (PGlite in DATA_DIR, as `npm start` keeps it).
 */
const dataDir = mkdtempSync(join(tmpdir(), 'record-safety-'));
let running: RunningRecord;
let record: RecordClient;

function startRecord(): Promise<RunningRecord> {
  // No room to follow: the archiver waits for one on its own, and these calls need none.
  const config = loadConfig(recordEnv, {
    LOG_LEVEL: 'silent',
    SHUTDOWN_GRACE_MS: '500',
    RECORD_GRPC_ADDR: '127.0.0.1:0',
    ROOM_ADDR: '127.0.0.1:9',
    DATA_DIR: dataDir,
    CURSOR_SECRET,
  });
  return start(config, undefined, { archiver: FAST });
}

async function problemOf(call: Promise<unknown>): Promise<DomainError> {
  const error = await call.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  if (!(error instanceof DomainError)) throw new Error(`expected a problem, got ${String(error)}`);
  return error;
}

beforeAll(async () => {
  running = await startRecord();
  record = recordClient(running.port);
}, 60_000);

afterAll(async () => {
  record.close();
  await running.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

const report = { reporterAgentId: 'a_victim001', postId: '1765000000000-0', agentId: 'a_spammer01', reason: 'harassment', note: 'again', callKey: 'k1' };

it('files, lists, reads and closes reports, each once, and answers report-not-found for an unknown id', async () => {
  const { report: made } = await record.call('createReport', report);
  const { callKey: _key, ...filed } = report;
  expect(made).toMatchObject({ ...filed, status: 'open', resolvedBy: '' });
  expect((await record.call('createReport', { ...report, note: 'again and again' })).report?.id).toBe(made?.id);
  const queue = await record.call('listReports', { status: 'open' });
  expect(queue.reports.map((r) => r.id)).toEqual([made?.id]);
  expect(queue.openTotal).toBe('1');
  expect((await record.call('getReport', { reportId: made?.id ?? '' })).report).toEqual(made);
  const closed = await record.call('resolveReport', { reportId: made?.id ?? '', status: 'dismissed', resolution: 'not harassment', resolvedBy: 'h_mod' });
  expect(closed.report).toMatchObject({ status: 'dismissed', resolution: 'not harassment', resolvedBy: 'h_mod' });
  expect((await record.call('listReports', { status: 'open' })).openTotal).toBe('0');
  expect((await problemOf(record.call('getReport', { reportId: 'rep_nothing' }))).slug).toBe('report-not-found');
  expect((await problemOf(record.call('resolveReport', { reportId: 'rep_nothing', status: 'dismissed', resolvedBy: 'h_mod' }))).slug).toBe('report-not-found');
});

it('refuses a report or an entry it could not keep as asked, naming the parameter', async () => {
  const cases: Array<[Promise<unknown>, string]> = [
    [record.call('createReport', { ...report, reason: 'boring' }), 'reason'],
    [record.call('createReport', { ...report, agentId: '' }), 'agent_id'],
    [record.call('createReport', { ...report, callKey: '' }), 'call_key'],
    [record.call('createReport', { ...report, note: 'x'.repeat(1_001) }), 'note'],
    [record.call('createReport', { ...report, note: 'bell \u0007' }), 'note'],
    [record.call('listReports', { status: 'closed' }), 'status'],
    [record.call('resolveReport', { reportId: 'rep_x', status: 'open', resolvedBy: 'h_mod' }), 'status'],
    [record.call('appendAudit', { entry: { id: 'e1', actorKind: 'robot', actorId: 'a_1', action: 'remove_post' } }), 'actor_kind'],
    [record.call('appendAudit', { entry: { id: 'e1', actorKind: 'agent', actorId: 'a_1', action: 'delete_everything' } }), 'action'],
    [record.call('appendAudit', { entry: { id: 'e1', actorKind: 'agent', actorId: '', action: 'block_agent' } }), 'actor_id'],
    [record.call('appendAudit', {}), 'entry'],
  ];
  for (const [call, parameter] of cases) {
    const problem = await problemOf(call);
    expect([problem.slug, problem.fields.parameter]).toEqual(['invalid-request', parameter]);
  }
});

it('pages the audit with cursors bound to their list, and hides who acted from the public log', async () => {
  for (let i = 0; i < 3; i += 1) {
    await record.call('appendAudit', {
      entry: { id: `pub-${i}`, actorKind: 'moderator', actorId: 'h_mod', action: 'suspend_agent', agentId: 'a_spammer01', reason: 'spam', public: true },
    });
  }
  await record.call('appendAudit', { entry: { id: 'own-0', actorKind: 'agent', actorId: 'a_victim001', action: 'block_agent', agentId: 'a_spammer01' } });
  const first = await record.call('listAudit', { publicOnly: true, limit: 2 });
  expect(first.entries.map((e) => e.id)).toEqual(['pub-2', 'pub-1']);
  expect(first.entries.every((e) => e.actorId === '')).toBe(true);
  const second = await record.call('listAudit', { publicOnly: true, limit: 2, cursor: first.nextCursor });
  expect(second.entries.map((e) => e.id)).toEqual(['pub-0']);
  expect(second.nextCursor).toBe('');
  // The public log's cursor pages neither the whole audit nor the reports.
  expect((await problemOf(record.call('listAudit', { publicOnly: false, limit: 2, cursor: first.nextCursor }))).slug).toBe('invalid-cursor');
  expect((await problemOf(record.call('listReports', { cursor: first.nextCursor }))).slug).toBe('invalid-cursor');
  expect((await record.call('listAudit', { agentId: 'a_victim001' })).entries.map((e) => e.id)).toEqual(['own-0']);
});

it('keeps reports and the audit across a restart of the record', async () => {
  const before = await record.call('listAudit', {});
  const reports = await record.call('listReports', {});
  record.close();
  await running.stop();
  running = await startRecord();
  record = recordClient(running.port);
  expect((await record.call('listAudit', {})).entries).toEqual(before.entries);
  expect((await record.call('listReports', {})).reports).toEqual(reports.reports);
}, 60_000);
