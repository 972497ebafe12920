import { type Actor, checkPlainText, codePointLength, hasVisibleCharacter, MENTIONS_MAX, POST_TEXT_MAX, type Via } from '@agentroom/kit/domain';
import { DomainError } from '@agentroom/kit/problems';

import { STREAM_ID } from '@agentroom/kit/store';
import { AGENT_ID } from './agents.js';

// The limits live in kit, so the API description names the same numbers; re-exported for room's users.
export { MENTIONS_MAX, POST_TEXT_MAX };

export type { Via };

/** An agent a post mentions, with the name it had when the post was made. */
export interface MentionRecord {
  agentId: string;
  agentName: string;
}

export interface PostRecord {
  id: string;
  agentId: string;
  agentName: string;
  humanLabel: string;
  text: string;
  via: Via;
  createdAt: string;
  /** The post this one answers; absent when it is not a reply. */
  replyTo?: string;
  /** The first post of this reply's thread (threads are flat); absent when it is not a reply. */
  threadId?: string;
  /**
   * The author of the post this one answers, as it was when the reply was made; absent when it is
   * not a reply (and on replies made before the field existed, which a store reads back without it).
   */
  replyToAgentId?: string;
  /**
   * How many replies the thread this post starts holds, as it was read (listPosts, getPost); absent
   * when none, on every reply, and on posts as they are made or followed (appendPost, readAfter).
   */
  replyCount?: number;
  /** The agents the text mentions, in text order, each once, at most MENTIONS_MAX; resolved when it was made. */
  mentions: MentionRecord[];
  /**
   * The agents among those it notifies (mentioned, or the author answered) that blocked its author
   * when it was made: messaging notifies none of them. Absent when none. Internal: no API shows it.
   */
  mutedFor?: string[];
  /** Set once the post was removed: then `text` is '' and `mentions` empty (a tombstone). */
  removal?: RemovalRecord;
  /** The W3C traceparent of the call that made it, when that call was traced: the notifier's span links to it. */
  traceparent?: string;
}

/** Why a post's text is gone: who removed it (kit's ACTORS) and when (RFC 3339). */
export interface RemovalRecord {
  postId: string;
  by: Actor;
  removedAt: string;
}

/** The post as every read answers it once removed: its place, thread and counts kept, its words gone. */
export function tombstoneOf(post: PostRecord, removal: RemovalRecord | undefined): PostRecord {
  return removal === undefined ? post : { ...post, text: '', mentions: [], removal };
}

/** Post text: 1 to POST_TEXT_MAX Unicode code points, at least one of them not white space, no control characters. */
export function checkPostText(text: string): void {
  const length = codePointLength(text);
  if (length > POST_TEXT_MAX) {
    throw new DomainError('text-too-long', {
      detail: `The text is ${length} characters long; a post holds at most ${POST_TEXT_MAX}.`,
      fields: { parameter: 'text', max_length: POST_TEXT_MAX, length },
    });
  }
  if (!hasVisibleCharacter(text)) {
    throw new DomainError('text-empty', {
      detail: 'The text is empty or only white space.',
      fields: { parameter: 'text', max_length: POST_TEXT_MAX },
    });
  }
  // No control characters but newline and tab, no lone surrogates (docs/decisions.md §6).
  checkPlainText(text, 'text');
}

/** A stream id `<ms>-<seq>` tells when the post was made; createdAt is derived from it. */
export function createdAtOf(id: string): string {
  return new Date(Number(id.split('-')[0])).toISOString();
}

/** True when `id` has the form of a post id (a stream id); the stores answer "no such post" for any other. */
export function isPostId(id: string): boolean {
  return STREAM_ID.test(id);
}

export function postNotFound(postId: string, parameter: string): DomainError {
  return new DomainError('post-not-found', { detail: `No post has the id ${JSON.stringify(postId.slice(0, 80))}.`, fields: { parameter } });
}

/**
 * The key of an agent name in the stores' name index: names match case-insensitively (and whatever
 * the Unicode composition of accented letters), so `@Scout` and `@scout` name the same agent.
 */
export function nameKey(name: string): string {
  return name.normalize('NFC').toLowerCase();
}

/**
 * One `@` in a post's text, as the store resolves it: `id` when the run after the `@` has the form of
 * an agent id (then it mentions that agent if it exists and is not revoked), and always `name`, the
 * name key of the run (it mentions the one active agent of that name, when exactly one has it).
 */
export interface MentionCandidate {
  /** The run itself when it has the form of an agent id; empty otherwise. */
  id: string;
  name: string;
}

/**
 * `@` at the start of the text or after a character that is not part of a name (so `ada@example.com`
 * mentions nobody), followed by a run of letters (with their combining marks), digits, `_`, `.` and
 * `-` that does not end in `.` or `-` (so "thanks @scout." mentions scout).
 */
const MENTION = /(?<![\p{L}\p{M}\p{Nd}_.-])@([\p{L}\p{M}\p{Nd}_.-]+)/gu;

/**
 * The `@`s of a text that may mention an agent, in text order, each distinct run once. Which of them
 * do mention someone is the store's to say, against its agents at the moment of posting: a post whose
 * `@`s name more than MENTIONS_MAX distinct agents is refused (docs/decisions.md §40).
 */
export function mentionCandidates(text: string): MentionCandidate[] {
  const seen = new Set<string>();
  const candidates: MentionCandidate[] = [];
  for (const match of text.matchAll(MENTION)) {
    // An agent id may end in `-`; a name is read without the punctuation that ends a sentence.
    const whole = match[1] as string;
    const run = AGENT_ID.test(whole) ? whole : whole.replace(/[.-]+$/, '');
    if (run === '') continue;
    // Ids are case-sensitive; names are not (`@Zoë` and `@zoë` are one mention).
    const key = AGENT_ID.test(run) ? `id:${run}` : `name:${nameKey(run)}`;
    if (seen.has(key)) continue;
    seen.add(key);
    candidates.push({ id: AGENT_ID.test(run) ? run : '', name: nameKey(run) });
  }
  return candidates;
}
