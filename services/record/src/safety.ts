import { randomBytes } from 'node:crypto';
import type { Database } from './db.js';

/** How a report stands: open in the queue, or closed by a moderator. */
export type ReportStatus = 'open' | 'dismissed' | 'actioned';

/** A report as the record keeps it; `seq` orders the queue and pages it. */
export interface StoredReport {
  seq: number;
  id: string;
  reporterAgentId: string;
  /** Empty when an agent is reported. */
  postId: string;
  agentId: string;
  reason: string;
  note: string;
  /** RFC 3339. */
  createdAt: string;
  status: ReportStatus;
  /** RFC 3339; empty while open. */
  resolvedAt: string;
  resolution: string;
  resolvedBy: string;
}

export interface NewReport {
  reporterAgentId: string;
  callKey: string;
  postId: string;
  agentId: string;
  reason: string;
  note: string;
}

/** One thing done, as the audit keeps it; `seq` orders the audit and pages it. */
export interface StoredAuditEntry {
  seq: number;
  id: string;
  /** RFC 3339. */
  at: string;
  actorKind: string;
  actorId: string;
  action: string;
  agentId: string;
  postId: string;
  reason: string;
  detail: string;
  public: boolean;
}

export type NewAuditEntry = Omit<StoredAuditEntry, 'seq' | 'at'> & { at?: string };

export interface SafetyPage<T> {
  items: T[];
  hasMore: boolean;
}

/**
 * What trust and safety keeps in the record (docs/decisions.md §40, §44): reports and the audit,
 * the same SQL on PostgreSQL and PGlite (migration 4). Always on the write database: a moderator
 * reads the queue right after closing a report, and a replica's lag would show it open again.
 */
export interface SafetyStore {
  /** Files a report; the same (reporter, call key) again answers the first, unchanged. */
  createReport(report: NewReport): Promise<StoredReport>;
  getReport(id: string): Promise<StoredReport | undefined>;
  /**
   * The open reports oldest first (`open`), or every report newest first; either only against
   * `agentId` when given. `after` is the seq of the last report of the page before.
   */
  listReports(query: { open: boolean; agentId?: string; limit: number; after?: number }): Promise<SafetyPage<StoredReport> & { openTotal: number }>;
  /** Closes an open report; a closed one is answered as it is. Undefined when no report has the id. */
  resolveReport(id: string, resolution: { status: Exclude<ReportStatus, 'open'>; resolution: string; resolvedBy: string }): Promise<StoredReport | undefined>;
  /** Appends an entry once per id: a repeat answers the entry first appended. */
  appendAudit(entry: NewAuditEntry): Promise<StoredAuditEntry>;
  /**
   * The audit newest first: all of it, or only its public entries; only those about `agentId`
   * when given (as the one acted on, or, outside the public log, as the actor). `before` is the seq
   * of the last entry of the page before.
   */
  listAudit(query: { publicOnly: boolean; agentId?: string; limit: number; before?: number }): Promise<SafetyPage<StoredAuditEntry>>;
}

interface ReportRow {
  seq: string;
  id: string;
  reporter_agent_id: string;
  post_id: string;
  agent_id: string;
  reason: string;
  note: string;
  created_at: string;
  status: ReportStatus;
  resolved_at: string | null;
  resolution: string;
  resolved_by: string;
}

interface AuditRow {
  seq: string;
  id: string;
  at: string;
  actor_kind: string;
  actor_id: string;
  action: string;
  agent_id: string;
  post_id: string;
  reason: string;
  detail: string;
  public: boolean;
}

/** Times as RFC 3339 in UTC with milliseconds, whichever database formats them. */
const iso = (column: string): string => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

const REPORT_COLUMNS = `seq::text AS seq, id, reporter_agent_id, post_id, agent_id, reason, note, ${iso('created_at')} AS created_at, status,
  ${iso('resolved_at')} AS resolved_at, resolution, resolved_by`;

const AUDIT_COLUMNS = `seq::text AS seq, id, ${iso('at')} AS at, actor_kind, actor_id, action, agent_id, post_id, reason, detail, public`;

function reportOf(row: ReportRow): StoredReport {
  return {
    seq: Number(row.seq),
    id: row.id,
    reporterAgentId: row.reporter_agent_id,
    postId: row.post_id,
    agentId: row.agent_id,
    reason: row.reason,
    note: row.note,
    createdAt: row.created_at,
    status: row.status,
    resolvedAt: row.resolved_at ?? '',
    resolution: row.resolution,
    resolvedBy: row.resolved_by,
  };
}

function auditOf(row: AuditRow): StoredAuditEntry {
  return {
    seq: Number(row.seq),
    id: row.id,
    at: row.at,
    actorKind: row.actor_kind,
    actorId: row.actor_id,
    action: row.action,
    agentId: row.agent_id,
    postId: row.post_id,
    reason: row.reason,
    detail: row.detail,
    public: row.public,
  };
}

/** What of an entry's detail the public log shows: when a suspension ends; never a report's id, nor who reported or acted. */
const PUBLIC_DETAIL = ['until'] as const;

/** An entry as the public moderation log shows it: without who acted, and only the public part of its detail. */
function publicPart(entry: StoredAuditEntry): StoredAuditEntry {
  let shown: Record<string, unknown> = {};
  try {
    const detail: unknown = JSON.parse(entry.detail);
    if (typeof detail === 'object' && detail !== null && !Array.isArray(detail)) {
      shown = Object.fromEntries(PUBLIC_DETAIL.flatMap((key) => (key in detail ? [[key, (detail as Record<string, unknown>)[key]]] : [])));
    }
  } catch {
    // Detail that is not JSON says nothing public.
  }
  return { ...entry, actorId: '', detail: Object.keys(shown).length === 0 ? '' : JSON.stringify(shown) };
}

/** The most a page holds, whatever is asked: no query reads without a LIMIT. */
const PAGE_MAX = 100;

function pageLimit(limit: number): number {
  return Math.min(PAGE_MAX, Math.max(1, Math.floor(Number.isFinite(limit) ? limit : 1)));
}

/** A report's id: opaque, unguessable, and never the reporter's. */
function reportId(): string {
  return `rep_${randomBytes(12).toString('base64url')}`;
}

export class SqlSafetyStore implements SafetyStore {
  constructor(private readonly db: Database) {}

  async createReport(report: NewReport): Promise<StoredReport> {
    // One statement either way: the new report, or none when (reporter, call_key) made one already.
    const [made] = await this.db.query<ReportRow>(
      `INSERT INTO reports (id, reporter_agent_id, call_key, post_id, agent_id, reason, note)
       VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (reporter_agent_id, call_key) DO NOTHING
       RETURNING ${REPORT_COLUMNS}`,
      [reportId(), report.reporterAgentId, report.callKey, report.postId, report.agentId, report.reason, report.note],
    );
    if (made !== undefined) return reportOf(made);
    const [first] = await this.db.query<ReportRow>(`SELECT ${REPORT_COLUMNS} FROM reports WHERE reporter_agent_id = $1 AND call_key = $2`, [
      report.reporterAgentId,
      report.callKey,
    ]);
    if (first === undefined) throw new Error('a report that conflicted on its call key is not found');
    return reportOf(first);
  }

  async getReport(id: string): Promise<StoredReport | undefined> {
    const [row] = await this.db.query<ReportRow>(`SELECT ${REPORT_COLUMNS} FROM reports WHERE id = $1`, [id]);
    return row === undefined ? undefined : reportOf(row);
  }

  async listReports(query: { open: boolean; agentId?: string; limit: number; after?: number }): Promise<SafetyPage<StoredReport> & { openTotal: number }> {
    const n = pageLimit(query.limit);
    const conditions: string[] = [];
    const params: unknown[] = [];
    const bind = (value: unknown): string => `$${params.push(value)}`;
    if (query.open) conditions.push("status = 'open'");
    if (query.agentId !== undefined) conditions.push(`agent_id = ${bind(query.agentId)}`);
    if (query.after !== undefined) conditions.push(query.open ? `seq > ${bind(query.after)}` : `seq < ${bind(query.after)}`);
    const where = conditions.length === 0 ? '' : `WHERE ${conditions.join(' AND ')}`;
    const order = query.open ? 'seq' : 'seq DESC';
    const rows = await this.db.query<ReportRow>(`SELECT ${REPORT_COLUMNS} FROM reports ${where} ORDER BY ${order} LIMIT ${bind(n + 1)}`, params);
    const [total] = await this.db.query<{ n: string }>("SELECT count(*)::text AS n FROM reports WHERE status = 'open'");
    return { items: rows.slice(0, n).map(reportOf), hasMore: rows.length > n, openTotal: Number(total?.n ?? 0) };
  }

  async resolveReport(
    id: string,
    resolution: { status: Exclude<ReportStatus, 'open'>; resolution: string; resolvedBy: string },
  ): Promise<StoredReport | undefined> {
    // Only an open report changes: the first moderator's word stands.
    const [closed] = await this.db.query<ReportRow>(
      `UPDATE reports SET status = $2, resolution = $3, resolved_by = $4, resolved_at = now()
       WHERE id = $1 AND status = 'open' RETURNING ${REPORT_COLUMNS}`,
      [id, resolution.status, resolution.resolution, resolution.resolvedBy],
    );
    return closed === undefined ? this.getReport(id) : reportOf(closed);
  }

  async appendAudit(entry: NewAuditEntry): Promise<StoredAuditEntry> {
    const [made] = await this.db.query<AuditRow>(
      `INSERT INTO audit (id, at, actor_kind, actor_id, action, agent_id, post_id, reason, detail, public)
       VALUES ($1, COALESCE($2::timestamptz, now()), $3, $4, $5, $6, $7, $8, $9, $10)
       ON CONFLICT (id) DO NOTHING
       RETURNING ${AUDIT_COLUMNS}`,
      [
        entry.id,
        entry.at === undefined || entry.at === '' ? null : entry.at,
        entry.actorKind,
        entry.actorId,
        entry.action,
        entry.agentId,
        entry.postId,
        entry.reason,
        entry.detail,
        entry.public,
      ],
    );
    if (made !== undefined) return auditOf(made);
    const [first] = await this.db.query<AuditRow>(`SELECT ${AUDIT_COLUMNS} FROM audit WHERE id = $1`, [entry.id]);
    if (first === undefined) throw new Error('an audit entry that conflicted on its id is not found');
    return auditOf(first);
  }

  async listAudit(query: { publicOnly: boolean; agentId?: string; limit: number; before?: number }): Promise<SafetyPage<StoredAuditEntry>> {
    const n = pageLimit(query.limit);
    const conditions: string[] = [];
    const params: unknown[] = [];
    const bind = (value: unknown): string => `$${params.push(value)}`;
    if (query.publicOnly) conditions.push('public');
    if (query.agentId !== undefined) {
      // The public log never says who acted, so it is not searched by actor either.
      const agent = bind(query.agentId);
      conditions.push(query.publicOnly ? `agent_id = ${agent}` : `(agent_id = ${agent} OR actor_id = ${agent})`);
    }
    if (query.before !== undefined) conditions.push(`seq < ${bind(query.before)}`);
    const where = conditions.length === 0 ? '' : `WHERE ${conditions.join(' AND ')}`;
    const rows = await this.db.query<AuditRow>(`SELECT ${AUDIT_COLUMNS} FROM audit ${where} ORDER BY seq DESC LIMIT ${bind(n + 1)}`, params);
    const items = rows.slice(0, n).map(auditOf);
    return { items: query.publicOnly ? items.map(publicPart) : items, hasMore: rows.length > n };
  }
}
