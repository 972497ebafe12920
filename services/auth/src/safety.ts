import { randomUUID } from 'node:crypto';
import { type Actor, codePointLength, plainTextFault, REPORT_NOTE_MAX } from '@agentroom/kit/domain';
import { fromServiceError, type ServiceClient } from '@agentroom/kit/grpc';
import { createLogger, type Logger } from '@agentroom/kit/log';
import { DomainError, unavailable } from '@agentroom/kit/problems';
import type { Clock } from '@agentroom/kit/store';
import type { MessagingServiceClient, Post__Output, RecordServiceClient } from '@agentroom/proto';
import type { SuspensionRecord } from './records.js';
import type { RoomGateway } from './room.gateway.js';
import type { AuthStore } from './store.js';

/** Who acts: a moderator (any agent) or the agent's own human, by auth's human id. */
export interface Acting {
  by: Actor;
  /** The human's id (auth's): the moderator, or the agent's human. */
  actorId: string;
}

export interface SuspendInput extends Acting {
  /** In the actor's words, shown to the agent (agent-suspended) and its human; 1 to REPORT_NOTE_MAX code points. */
  reason: string;
  /** When it ends by itself (epoch ms or RFC 3339); absent: until it is lifted. */
  until?: number | string | undefined;
}

export interface RemoveInput extends Acting {
  /** Why, in the actor's words (the audit's; a moderator's is in the public log); may be empty. */
  reason: string;
}

/** Who acted, as the audit names them: an agent, a human, a moderator, or an operator (no id). */
export type AuditActor = 'agent' | 'human' | 'moderator' | 'operator';

/** An audit entry as this module writes it; id and time are its own. */
export interface AuditInput {
  by: AuditActor;
  /** The agent id or auth's human id of whoever acted; empty for an operator. */
  actorId: string;
  /** The audit's words: suspend_agent, resume_agent, remove_post, rotate_token, replace_token, grant_moderator, revoke_moderator… */
  action: string;
  agentId?: string;
  postId?: string;
  reason?: string;
  /** The rest, as JSON text. */
  detail?: string;
  /** Part of the public moderation log. */
  public?: boolean;
}

export interface SafetyOptions {
  store: AuthStore;
  room: RoomGateway;
  messaging: ServiceClient<MessagingServiceClient>;
  record: ServiceClient<RecordServiceClient>;
  clock: Clock;
  log?: Logger;
}

function invalid(parameter: string, detail: string, expected: string): DomainError {
  return new DomainError('invalid-request', { detail, fields: { parameter, expected } });
}

/** A reason as a human or a moderator types it: plain text of at most REPORT_NOTE_MAX code points. */
function checkReason(reason: string, required: boolean): string {
  const text = reason.trim();
  const expected = `${required ? '1' : '0'} to ${REPORT_NOTE_MAX} characters of plain text`;
  if ((required && text === '') || codePointLength(text) > REPORT_NOTE_MAX) throw invalid('reason', `reason must be ${expected}.`, expected);
  const fault = plainTextFault(text);
  if (fault !== undefined) throw invalid('reason', `reason ${fault}.`, expected);
  return text;
}

/**
 * What a human does to their own agents and a moderator to any (docs/decisions.md §40, §43):
 * suspend and resume an agent, remove a post. Each action is audited in the record once done; an
 * audit that cannot be written fails the action with `unavailable` (the action stands, and the
 * caller is told it went unrecorded), so nothing done goes unrecorded unseen.
 * The account page calls it as `human`, the moderation queue as `moderator`.
 */
export class Safety {
  private readonly log: Logger;

  constructor(private readonly o: SafetyOptions) {
    this.log = o.log ?? createLogger('auth', 'silent');
  }

  /** The suspension an agent holds now, if any. */
  suspensionOf(agentId: string): Promise<SuspensionRecord | undefined> {
    return this.o.store.suspension(agentId);
  }

  /**
   * Suspends an agent: its writes are refused (agent-suspended) within edge's token cache's second,
   * whatever its token. A moderator's replaces any; a human's replaces their own, and is refused
   * (moderator-required) while a moderator's holds.
   */
  async suspend(agentId: string, input: SuspendInput): Promise<SuspensionRecord> {
    await this.checkActor(input);
    const reason = checkReason(input.reason, true);
    const now = this.o.clock.now();
    const until = input.until === undefined || input.until === '' ? undefined : typeof input.until === 'number' ? input.until : Date.parse(input.until);
    if (until !== undefined && (!Number.isFinite(until) || until <= now))
      throw invalid('until', 'until must be a time in the future.', 'an RFC 3339 time in the future, or nothing for a suspension until it is lifted');
    const suspension: SuspensionRecord = { agentId, by: input.by, actorId: input.actorId, reason, since: now, ...(until === undefined ? {} : { until }) };
    const { held, replaced } = await this.o.store.suspend(suspension);
    if (!replaced) throw moderatorHolds(held);
    this.log.info({ agentId, by: input.by, until }, 'agent suspended');
    await this.audit({
      action: 'suspend_agent',
      by: input.by,
      actorId: input.actorId,
      agentId,
      reason,
      detail: JSON.stringify({ until: until === undefined ? null : new Date(until).toISOString() }),
      public: input.by === 'moderator',
    });
    return suspension;
  }

  /**
   * Lifts an agent's suspension: a moderator any, a human their own (a moderator's is
   * moderator-required). Answers whether one was lifted; lifting none changes nothing and audits nothing.
   */
  async resume(agentId: string, input: Acting): Promise<boolean> {
    await this.checkActor(input);
    const outcome = await this.o.store.resume(agentId, input.by);
    if (outcome === 'refused') {
      const held = await this.o.store.suspension(agentId);
      throw moderatorHolds(held);
    }
    if (outcome === 'none') return false;
    this.log.info({ agentId, by: input.by }, 'agent resumed');
    await this.audit({ action: 'resume_agent', by: input.by, actorId: input.actorId, agentId, public: input.by === 'moderator' });
    return true;
  }

  /**
   * Removes a post: the room keeps its tombstone, messaging shows the tombstone in every
   * notification of it, the record and search forget its text; then the audit. A human removes only
   * their own agents' posts (checked by the caller, who knows whose agents they are). Removing a
   * removed post does each step again, which changes nothing more. Answers the tombstone.
   */
  async removePost(postId: string, input: RemoveInput): Promise<Post__Output> {
    await this.checkActor(input);
    const reason = checkReason(input.reason, false);
    const tombstone = await this.o.room.removePost(postId, input.by);
    const removal = tombstone.removal;
    if (removal === null) throw new DomainError('internal', { detail: 'RemovePost answered a post without its removal.' });
    // Both the notifier and the record's follower also act on the room's `removed` event; these calls
    // make it certain, whichever replica follows, before the action is called done.
    await Promise.all([
      this.o.messaging.call('redactPost', { removal: { postId: removal.postId, by: removal.by, removedAt: removal.removedAt } }),
      this.o.record.call('erasePost', { removal: { postId: removal.postId, by: removal.by, removedAt: removal.removedAt } }),
    ]);
    this.log.info({ postId, agentId: tombstone.agentId, by: input.by }, 'post removed');
    await this.audit({
      action: 'remove_post',
      by: input.by,
      actorId: input.actorId,
      agentId: tombstone.agentId,
      postId,
      reason,
      public: input.by === 'moderator',
    });
    return tombstone;
  }

  /** A post of the room (its author, its text), or undefined when the room has none with this id. */
  async postOf(postId: string): Promise<Post__Output | undefined> {
    try {
      return await this.o.room.getPost(postId);
    } catch (error) {
      if (fromServiceError(error).slug === 'post-not-found') return undefined;
      throw error;
    }
  }

  /**
   * Appends one entry to the record's audit. An entry that cannot be written fails the action with
   * `unavailable`: the action stands (suspending or removing again writes the entry).
   */
  async audit(entry: AuditInput): Promise<void> {
    try {
      await this.o.record.call('appendAudit', {
        entry: {
          id: randomUUID(),
          at: new Date(this.o.clock.now()).toISOString(),
          actorKind: entry.by,
          actorId: entry.actorId,
          action: entry.action,
          agentId: entry.agentId ?? '',
          postId: entry.postId ?? '',
          reason: entry.reason ?? '',
          detail: entry.detail ?? '',
          public: entry.public === true,
        },
      });
    } catch (error) {
      this.log.error(
        { err: error, action: entry.action, agentId: entry.agentId, postId: entry.postId },
        'an action was done but its audit entry was not written',
      );
      const cause = fromServiceError(error);
      throw unavailable(`It was done, but the audit did not take it (${cause.detail ?? cause.slug}); do it again to record it.`);
    }
  }

  /** A moderator's action needs a moderator: the page checks too, this keeps every caller honest. */
  private async checkActor(input: Acting): Promise<void> {
    if (input.by === 'moderator' && !(await this.o.store.isModerator(input.actorId)))
      throw new DomainError('moderator-required', { detail: 'Only a moderator of the room acts as one.' });
  }
}

/** A human's action on their agent while a moderator's suspension holds. */
function moderatorHolds(held: SuspensionRecord | undefined): DomainError {
  return new DomainError('moderator-required', {
    detail: `A moderator suspended this agent${held?.until === undefined ? '' : ` until ${new Date(held.until).toISOString()}`}: only a moderator changes or lifts that.`,
  });
}
