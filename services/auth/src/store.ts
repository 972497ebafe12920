import type { DeviceFlow, DeviceFlowStatus, Human, OAuthRecordKind, OAuthRecords, Session, SuspensionRecord, TokenRecord } from './records.js';

/** The state of a wrong-code counter: how many in the running window, and when it ends. */
export interface AttemptWindow {
  count: number;
  /** Epoch ms when the window ends; 0 when no window is running. */
  resetAt: number;
}

/** A leaky bucket as stored: its level when last filled, and when that was. */
export interface Bucket {
  level: number;
  /** Epoch ms of the last fill. */
  at: number;
}

/** The level of a bucket at `now`, drained one per `drainMs` since its last fill. */
export function drainedLevel(bucket: Bucket | undefined, now: number, drainMs: number): number {
  if (!bucket) return 0;
  return Math.max(0, bucket.level - Math.max(0, now - bucket.at) / drainMs);
}

/** A token revocation as the revocation feed carries it to every watcher, on every auth replica. */
export interface Revocation {
  /** Its position in the feed, `<ms>-<seq>` as Redis stream ids. */
  id: string;
  tokenId: string;
  agentId: string;
  /** Epoch ms on the revoking replica's clock. */
  revokedAt: number;
}

/** What follows the revocation feed (auth's WatchRevocations handler). */
export interface RevocationWatcher {
  revoked(revocation: Revocation): void;
  /**
   * The feed is still being followed. Called at least every {@link REVOCATION_HEARTBEAT_MS} (or the
   * store's own setting) while the watch lasts, so a watcher can tell a quiet feed from a stalled one.
   */
  alive(): void;
  /** Revocations can no longer be assured to arrive (storage lost); nothing is called after it. */
  broken(error: Error): void;
}

/** The longest a followed revocation feed goes without saying it is alive (docs/decisions.md §14). */
export const REVOCATION_HEARTBEAT_MS = 1_000;

/** How many revocations the Redis feed keeps (`XADD MAXLEN ~`): watchers follow it live, so a few suffice. */
export const REVOCATION_FEED_LENGTH = 10_000;

/** Settings of a store's revocation feed; tests shorten the heartbeat. */
export interface RevocationFeedOptions {
  /** Defaults to {@link REVOCATION_HEARTBEAT_MS}. */
  heartbeatMs?: number;
}

/**
 * Where auth keeps flows, tokens, humans and sessions. Two implementations, Redis and memory,
 * held to one contract suite. Secrets are stored only as hashes (the one exception, a grant's
 * token, lives in its flow until the poll that delivers it). Time comes from the store's Clock, so
 * every rule that depends on it reads the same time in both implementations and in tests.
 */
export interface AuthStore {
  readonly kind: 'redis' | 'memory';

  /** Stores a new flow until its `retainUntil`; false (nothing stored) when its user code is taken. */
  createFlow(flow: DeviceFlow): Promise<boolean>;
  flowByDevice(deviceHash: string): Promise<DeviceFlow | undefined>;
  flowByUserCode(userCode: string): Promise<DeviceFlow | undefined>;
  /** Replaces the flow only if it is still in `from` (compare-and-set); its expiry is kept. */
  transitionFlow(from: DeviceFlowStatus, next: DeviceFlow): Promise<boolean>;
  /** Removes and answers the flow in one step: of concurrent takers, exactly one gets it. */
  takeFlow(deviceHash: string): Promise<DeviceFlow | undefined>;
  deleteFlow(flow: DeviceFlow): Promise<void>;
  /**
   * Records a poll of the flow unless the previous recorded one was less than `intervalMs` ago;
   * answers how long to wait (0: this poll is admitted). Atomic, so one of concurrent polls wins.
   */
  admitPoll(flow: DeviceFlow, intervalMs: number): Promise<number>;

  /** Stores a new token record until `keepUntil` (past its expiry, so it still answers "expired"). */
  saveToken(token: TokenRecord, keepUntil: number): Promise<void>;
  /** Replaces a stored token record (revocation), keeping its retention; a forgotten one stays gone. */
  updateToken(token: TokenRecord): Promise<void>;
  tokenByHash(hash: string): Promise<TokenRecord | undefined>;
  tokenById(id: string): Promise<TokenRecord | undefined>;
  /**
   * A page of the human's live tokens (not revoked, not expired) in one of their lists, newest first:
   * at most `limit`, after the token at `after` (the last of the page before). Read from an index of
   * that list alone, so the page costs the same for a human with ten agents or ten thousand; a token
   * leaves the index when it is revoked or expires.
   */
  liveTokensOfHuman(humanId: string, list: TokenList, limit: number, after?: TokenPosition): Promise<TokenPage>;
  /** Every retained token of an agent, newest first. */
  tokensOfAgent(agentId: string): Promise<TokenRecord[]>;

  /**
   * Tells every revocation watcher, of every auth replica that shares this storage, that a token was
   * revoked. Answers the revocation with its position in the feed.
   */
  publishRevocation(revocation: Omit<Revocation, 'id'>): Promise<Revocation>;
  /**
   * Follows the revocation feed. Resolves, with the function that stops the watch, once the watch
   * is positioned: every revocation published from then on, by any replica, reaches `watcher` in
   * order. Rejects when storage cannot be reached.
   */
  watchRevocations(watcher: RevocationWatcher): Promise<() => void>;

  /**
   * Stores an OAuth record of `kind` under `id` until `keepUntil` (replacing one there). With
   * `owner`, the record is also listed under that owner (a human's connections) until then.
   */
  putRecord<K extends OAuthRecordKind>(kind: K, id: string, record: OAuthRecords[K], keepUntil: number, owner?: string): Promise<void>;
  record<K extends OAuthRecordKind>(kind: K, id: string): Promise<OAuthRecords[K] | undefined>;
  /** Replaces a stored record, keeping its retention; a record that is gone stays gone. */
  updateRecord<K extends OAuthRecordKind>(kind: K, id: string, record: OAuthRecords[K]): Promise<void>;
  /**
   * Marks a single-use record (a code, a refresh token) used at `usedAt`, atomically: of concurrent
   * users exactly one gets `first: true`. Answers the record as it was before, or undefined when unknown.
   */
  useRecord<K extends 'code' | 'refresh' | 'authorization'>(
    kind: K,
    id: string,
    usedAt: number,
  ): Promise<{ record: OAuthRecords[K]; first: boolean } | undefined>;
  deleteRecord(kind: OAuthRecordKind, id: string): Promise<void>;
  /** The records listed under `owner`, newest first; those past their retention are left out. */
  recordsOf<K extends OAuthRecordKind>(kind: K, owner: string): Promise<OAuthRecords[K][]>;

  /** Creates a human; false when the name (case-insensitive) is taken. */
  createHuman(human: Human): Promise<boolean>;
  humanByName(name: string): Promise<Human | undefined>;
  humanById(id: string): Promise<Human | undefined>;

  /** Stores a session until its `expiresAt`. */
  saveSession(session: Session): Promise<void>;
  session(idHash: string): Promise<Session | undefined>;
  deleteSession(idHash: string): Promise<void>;

  /** Counts one event under `key` in a window of `windowMs` that starts with the first event. */
  countAttempt(key: string, windowMs: number): Promise<AttemptWindow>;
  /** The window still running under `key`, or `{count: 0, resetAt: 0}`. */
  attempts(key: string): Promise<AttemptWindow>;

  /**
   * A leaky bucket under `key`: adds one event, after draining one per `drainMs` since the last, and
   * answers the level (events not yet drained, fractional). Atomic, so concurrent events all count.
   */
  fillBucket(key: string, drainMs: number): Promise<number>;
  /** The level of the bucket under `key` now, drained one per `drainMs`; 0 when empty or unknown. */
  bucketLevel(key: string, drainMs: number): Promise<number>;

  /**
   * Suspends an agent (docs/decisions.md §43): replaces the suspension it holds, unless that one is a
   * moderator's and this one its human's; then nothing changes and the moderator's is answered.
   * Atomic, so a human's suspension never overwrites a moderator's made at the same moment.
   */
  suspend(suspension: SuspensionRecord): Promise<{ held: SuspensionRecord; replaced: boolean }>;
  /** The suspension an agent holds now: none once its `until` has passed. */
  suspension(agentId: string): Promise<SuspensionRecord | undefined>;
  /**
   * Lifts an agent's suspension: by a moderator any, by its human only their own (`refused`: a
   * moderator's holds, and stays). Atomic, as `suspend`.
   */
  resume(agentId: string, by: SuspensionRecord['by']): Promise<'lifted' | 'none' | 'refused'>;

  /** Makes a human a moderator of the room, or no longer one. */
  setModerator(humanId: string, moderator: boolean): Promise<void>;
  /** The ids of the room's moderators (humans), in no order. */
  moderators(): Promise<string[]>;
  isModerator(humanId: string): Promise<boolean>;

  /** Throws when storage cannot be reached. */
  ping(): Promise<void>;
}

/** Whether a suspension still holds at `now`: made, and its end (if any) not reached. */
export function suspensionHolds(suspension: SuspensionRecord | undefined, now: number): suspension is SuspensionRecord {
  return suspension !== undefined && (suspension.until === undefined || suspension.until > now);
}

/**
 * The two lists of a human's tokens on /account: the agents they approved one by one, and those an
 * operator provisioned in their name (a load test's thousands). A connection's tokens are in neither:
 * they are shown as their connection.
 */
export type TokenList = 'approved' | 'provisioned';

/** A token that still works at `now`: not revoked, not expired. */
export function isLiveToken(token: TokenRecord, now: number): boolean {
  return token.revokedAt === undefined && token.expiresAt > now;
}

/** The list a token is shown in, or undefined for a connection's. */
export function listOfToken(token: TokenRecord): TokenList | undefined {
  if (token.connectionId !== undefined) return undefined;
  return token.provisioned === undefined ? 'approved' : 'provisioned';
}

/** Where a token sits in its list, newest first: by when it was made, then by id (so ties have one order). */
export interface TokenPosition {
  createdAt: number;
  id: string;
}

/** One page of a token list. */
export interface TokenPage {
  /** Live tokens, newest first. */
  tokens: TokenRecord[];
  /** How many live tokens the list holds. */
  total: number;
  /** How many of them come before this page (newer than `after`). */
  offset: number;
  /** Whether older live tokens follow the page. */
  hasMore: boolean;
}

/**
 * A token's place in its list as one string whose byte order is the list's order: the creation time
 * in 15 digits, a dot, the id. Newest first is the reverse of that order.
 */
export function positionKey(position: TokenPosition): string {
  return `${String(position.createdAt).padStart(15, '0')}.${position.id}`;
}

/** The form under which a human's name is unique: trimmed, NFKC, case-folded. */
export function nameKey(name: string): string {
  return name.trim().normalize('NFKC').toLowerCase();
}
