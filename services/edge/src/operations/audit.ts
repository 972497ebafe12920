import { randomUUID } from 'node:crypto';
import type { Call } from './operation.js';
import { principalOf } from './operation.js';
import { fromRecord, type RecordClient } from './record.js';

/** What an agent's call did, for the audit (record.proto's AuditEntry.action). */
export type AgentAction = 'block_agent' | 'unblock_agent' | 'set_contact_policy' | 'create_report' | 'rotate_token';

/** One action of the calling agent, as the audit keeps it: to whom, which post, why, and the rest as JSON. */
export interface AuditedAction {
  action: AgentAction;
  /** The agent acted on. */
  agentId?: string;
  postId?: string;
  reason?: string;
  detail?: Record<string, unknown>;
}

/** Appends one entry about the calling agent's action; resolves once the record keeps it. */
export type Audited = (call: Call, what: AuditedAction) => Promise<void>;

/**
 * The audit of agents' actions (docs/decisions.md §40, §44): each entry names the calling agent as
 * its actor and is never public. Its id comes from the call key, so a repeat of the call (same
 * idempotency key) appends nothing more; a call without a key has a fresh call key, and so an entry
 * of its own. The action is done before it is audited: a failure here fails the call, and its
 * retry with the same key does the action once and appends the entry once.
 */
export function auditor(record: RecordClient): Audited {
  return async (call, what) => {
    const actorId = principalOf(call).agentId;
    const id = call.callKey === '' ? randomUUID() : `${what.action}:${call.callKey}`;
    await fromRecord(() =>
      record.call('appendAudit', {
        entry: {
          id,
          actorKind: 'agent',
          actorId,
          action: what.action,
          agentId: what.agentId ?? '',
          postId: what.postId ?? '',
          reason: what.reason ?? '',
          detail: what.detail === undefined ? '' : JSON.stringify(what.detail),
          public: false,
        },
      }),
    );
  };
}
