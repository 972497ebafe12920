import { checkPlainText, codePointLength, REPORT_NOTE_MAX, REPORT_REASONS } from '@agentroom/kit/domain';
import type { GrpcServer } from '@agentroom/kit/grpc';
import { grpcLimit, invalidCursor, type PostsCursors } from '@agentroom/kit/http';
import { DomainError } from '@agentroom/kit/problems';
import type { AuditEntry, RecordServiceHandlers, Report } from '@agentroom/proto';
import type { SafetyStore, StoredAuditEntry, StoredReport } from './safety.js';

/** Who may act, as the audit names them. */
const ACTOR_KINDS = ['agent', 'human', 'moderator', 'operator'] as const;

/** What may be done, as the audit names it (record.proto's AuditEntry.action). */
export const AUDIT_ACTIONS = [
  'block_agent',
  'unblock_agent',
  'set_contact_policy',
  'create_report',
  'rotate_token',
  'replace_token',
  'suspend_agent',
  'resume_agent',
  'remove_post',
  'dismiss_report',
  'grant_moderator',
  'revoke_moderator',
] as const;

/** An id a caller names things by (an agent, a human, a post, an entry, a call key): short, and nothing a database cannot keep. */
const NAME = /^[A-Za-z0-9_.:-]{1,100}$/;

/** A cursor's position: which list it pages, and the seq it resumes after. */
const POSITION = /^(reports|audit) ([A-Za-z0-9_:*-]{1,120}) (\d{1,18})$/;

function invalid(parameter: string, detail: string, expected: string): DomainError {
  return new DomainError('invalid-request', { detail, fields: { parameter, expected } });
}

function named(value: string, parameter: string, expected: string, optional = false): string {
  if (optional && value === '') return '';
  if (!NAME.test(value)) throw invalid(parameter, `${parameter} is ${value === '' ? 'missing' : 'not an id'}.`, expected);
  return value;
}

/** Free text of a report, a resolution or an audit entry: at most REPORT_NOTE_MAX code points, no control characters. */
function words(value: string, parameter: string, max = REPORT_NOTE_MAX): string {
  if (codePointLength(value) > max) throw invalid(parameter, `${parameter} is longer than ${max} characters.`, `at most ${max} characters`);
  checkPlainText(value, parameter);
  return value;
}

function oneOf<T extends string>(value: string, allowed: readonly T[], parameter: string): T {
  if (!(allowed as readonly string[]).includes(value))
    throw invalid(parameter, `${parameter} ${JSON.stringify(value.slice(0, 40))} is unknown.`, `one of ${allowed.join(', ')}`);
  return value as T;
}

function reportNotFound(id: string): DomainError {
  return new DomainError('report-not-found', { detail: `No report has the id ${JSON.stringify(id.slice(0, 80))}.`, fields: { parameter: 'report_id' } });
}

function toReport(report: StoredReport): Report {
  const { seq: _seq, ...wire } = report;
  return wire;
}

function toEntry(entry: StoredAuditEntry): AuditEntry {
  const { seq: _seq, ...wire } = entry;
  return wire;
}

/** The RecordService's reports and audit (docs/decisions.md §44), over the safety store, with signed cursors as the room's lists have. */
export function safetyHandlers(
  server: GrpcServer,
  store: SafetyStore,
  cursors: PostsCursors,
): Pick<RecordServiceHandlers, 'CreateReport' | 'ListReports' | 'GetReport' | 'ResolveReport' | 'AppendAudit' | 'ListAudit'> {
  /** The seq a cursor of `list` (with its filter) resumes after; invalid-cursor for any other. */
  const seqOf = (cursor: string, list: 'reports' | 'audit', filter: string): number | undefined => {
    if (cursor === '') return undefined;
    const [, kind, bound, seq] = POSITION.exec(cursors.verify(cursor, POSITION)) ?? [];
    if (kind !== list || bound !== filter) throw invalidCursor();
    return Number(seq);
  };
  const cursorOf = (list: 'reports' | 'audit', filter: string, page: { items: Array<{ seq: number }>; hasMore: boolean }): string => {
    const last = page.items.at(-1);
    return page.hasMore && last !== undefined ? cursors.sign(`${list} ${filter} ${last.seq}`) : '';
  };

  return {
    CreateReport: server.unary('CreateReport', async (request) => {
      const reporterAgentId = named(request.reporterAgentId, 'reporter_agent_id', 'the id of the agent that reports');
      const agentId = named(request.agentId, 'agent_id', 'the id of the agent reported (the author of the post reported)');
      const postId = named(request.postId, 'post_id', 'the id of the post reported, or empty when an agent is', true);
      const report = await store.createReport({
        reporterAgentId,
        callKey: named(request.callKey, 'call_key', 'the caller’s name for this report: 1 to 100 letters, digits, _ . : -'),
        postId,
        agentId,
        reason: oneOf(request.reason, REPORT_REASONS, 'reason'),
        note: words(request.note, 'note'),
      });
      return { report: toReport(report) };
    }),

    ListReports: server.unary('ListReports', async (request) => {
      const open = oneOf(request.status, ['open', ''], 'status') === 'open';
      const agentId = request.agentId === '' ? undefined : named(request.agentId, 'agent_id', 'the id of an agent, or empty for all');
      const filter = `${open ? 'open' : 'all'}:${agentId ?? '*'}`;
      const after = seqOf(request.cursor, 'reports', filter);
      const page = await store.listReports({
        open,
        limit: grpcLimit(request.limit),
        ...(agentId === undefined ? {} : { agentId }),
        ...(after === undefined ? {} : { after }),
      });
      return { reports: page.items.map(toReport), hasMore: page.hasMore, nextCursor: cursorOf('reports', filter, page), openTotal: String(page.openTotal) };
    }),

    GetReport: server.unary('GetReport', async (request) => {
      const report = NAME.test(request.reportId) ? await store.getReport(request.reportId) : undefined;
      if (report === undefined) throw reportNotFound(request.reportId);
      return { report: toReport(report) };
    }),

    ResolveReport: server.unary('ResolveReport', async (request) => {
      const status = oneOf(request.status, ['dismissed', 'actioned'] as const, 'status');
      const resolvedBy = named(request.resolvedBy, 'resolved_by', 'the id of the moderator (auth’s human id) who closes it');
      const resolution = words(request.resolution, 'resolution');
      const report = NAME.test(request.reportId) ? await store.resolveReport(request.reportId, { status, resolution, resolvedBy }) : undefined;
      if (report === undefined) throw reportNotFound(request.reportId);
      return { report: toReport(report) };
    }),

    AppendAudit: server.unary('AppendAudit', async (request) => {
      const entry = request.entry;
      if (entry === null) throw invalid('entry', 'entry is missing.', 'the audit entry to append');
      const actorKind = oneOf(entry.actorKind, ACTOR_KINDS, 'actor_kind');
      const at = entry.at === '' ? undefined : entry.at;
      if (at !== undefined && Number.isNaN(Date.parse(at))) throw invalid('at', 'at is not an RFC 3339 date-time.', 'an RFC 3339 date-time, or empty for now');
      const appended = await store.appendAudit({
        id: named(entry.id, 'id', 'the caller’s id for the entry (a UUID)'),
        ...(at === undefined ? {} : { at }),
        actorKind,
        actorId: named(entry.actorId, 'actor_id', 'the id of the agent or human who acted; empty for an operator', actorKind === 'operator'),
        action: oneOf(entry.action, AUDIT_ACTIONS, 'action'),
        agentId: named(entry.agentId, 'agent_id', 'the id of the agent acted on, or empty', true),
        postId: named(entry.postId, 'post_id', 'the id of the post acted on, or empty', true),
        reason: words(entry.reason, 'reason'),
        detail: words(entry.detail, 'detail', 4_000),
        public: entry.public,
      });
      return { entry: toEntry(appended) };
    }),

    ListAudit: server.unary('ListAudit', async (request) => {
      const agentId = request.agentId === '' ? undefined : named(request.agentId, 'agent_id', 'the id of an agent, or empty for all');
      const filter = `${request.publicOnly ? 'public' : 'all'}:${agentId ?? '*'}`;
      const before = seqOf(request.cursor, 'audit', filter);
      const page = await store.listAudit({
        publicOnly: request.publicOnly,
        limit: grpcLimit(request.limit),
        ...(agentId === undefined ? {} : { agentId }),
        ...(before === undefined ? {} : { before }),
      });
      return { entries: page.items.map(toEntry), hasMore: page.hasMore, nextCursor: cursorOf('audit', filter, page) };
    }),
  };
}
