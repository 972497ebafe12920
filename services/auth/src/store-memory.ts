import { type Clock, StreamIds, systemClock } from '@agentroom/kit/store';
import type { DeviceFlow, DeviceFlowStatus, Human, OAuthRecordKind, OAuthRecords, Session, SuspensionRecord, TokenRecord } from './records.js';
import {
  type AttemptWindow,
  type AuthStore,
  type Bucket,
  drainedLevel,
  isLiveToken,
  listOfToken,
  nameKey,
  positionKey,
  REVOCATION_HEARTBEAT_MS,
  suspensionHolds,
  type Revocation,
  type RevocationFeedOptions,
  type RevocationWatcher,
  type TokenList,
  type TokenPage,
  type TokenPosition,
} from './store.js';

interface Expiring<T> {
  value: T;
  expiresAt: number;
}

/** A map whose entries lapse at their own time on the store's clock, as Redis keys with a TTL do. */
class ExpiringMap<T> {
  private readonly entries = new Map<string, Expiring<T>>();

  constructor(private readonly clock: Clock) {}

  get(key: string): T | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= this.clock.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return entry.value;
  }

  set(key: string, value: T, expiresAt: number): void {
    this.entries.set(key, { value, expiresAt });
  }

  expiryOf(key: string): number | undefined {
    return this.get(key) === undefined ? undefined : this.entries.get(key)?.expiresAt;
  }

  delete(key: string): void {
    this.entries.delete(key);
  }
}

const newestFirst = (a: TokenRecord, b: TokenRecord): number => b.createdAt - a.createdAt;

/** A live token in a human's list: its place (`positionKey`), its record's hash, when it stops working. */
interface Listed {
  key: string;
  hash: string;
  expiresAt: number;
}

/** The key of a human's list in `MemoryAuthStore.lists`. */
function listKey(list: TokenList, humanId: string): string {
  return `${list}:${humanId}`;
}

/** Where `key` goes in `entries` (ordered by key): the first entry at or after it. */
function lowerBound(entries: readonly Listed[], key: string): number {
  let low = 0;
  let high = entries.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if ((entries[middle] as Listed).key < key) low = middle + 1;
    else high = middle;
  }
  return low;
}

/**
 * The embedded default: everything in this process, lost on restart. Every method finishes
 * synchronously before it answers, which makes each one atomic as the contract requires.
 */
export class MemoryAuthStore implements AuthStore {
  readonly kind = 'memory';
  private readonly flows: ExpiringMap<DeviceFlow>;
  private readonly codes: ExpiringMap<string>;
  private readonly polls: ExpiringMap<number>;
  private readonly tokens: ExpiringMap<TokenRecord>;
  private readonly tokenIds: ExpiringMap<string>;
  /** Each agent's tokens (hashes), so its reads do not pass over every other token. */
  private readonly agentTokens = new Map<string, Set<string>>();
  /** Each human's live tokens by list (`<list>:<humanId>`), oldest first: a page is a slice. */
  private readonly lists = new Map<string, Listed[]>();
  private readonly humans = new Map<string, Human>();
  private readonly names = new Map<string, string>();
  private readonly sessions: ExpiringMap<Session>;
  private readonly attemptWindows: ExpiringMap<AttemptWindow>;
  private readonly buckets: ExpiringMap<Bucket>;
  /** OAuth records by `<kind>:<id>`, and the ids listed under an owner by `<kind>:<owner>`. */
  private readonly records: ExpiringMap<unknown>;
  private readonly owners = new Map<string, Map<string, number>>();
  private readonly suspensions = new Map<string, SuspensionRecord>();
  private readonly moderatorIds = new Set<string>();
  /** The revocation feed of this one process: watchers hear each revocation as it is published. */
  private readonly revocationWatchers = new Set<RevocationWatcher>();
  private readonly heartbeatMs: number;
  private heartbeat: NodeJS.Timeout | undefined;
  /** Ids made as Redis makes stream ids, so the feed's positions read the same in both stores. */
  private readonly ids = new StreamIds(() => this.clock.now());

  constructor(
    private readonly clock: Clock = systemClock,
    options: RevocationFeedOptions = {},
  ) {
    this.heartbeatMs = options.heartbeatMs ?? REVOCATION_HEARTBEAT_MS;
    this.flows = new ExpiringMap(clock);
    this.codes = new ExpiringMap(clock);
    this.polls = new ExpiringMap(clock);
    this.tokens = new ExpiringMap(clock);
    this.tokenIds = new ExpiringMap(clock);
    this.sessions = new ExpiringMap(clock);
    this.attemptWindows = new ExpiringMap(clock);
    this.buckets = new ExpiringMap(clock);
    this.records = new ExpiringMap(clock);
  }

  putRecord<K extends OAuthRecordKind>(kind: K, id: string, record: OAuthRecords[K], keepUntil: number, owner?: string): Promise<void> {
    this.records.set(`${kind}:${id}`, structuredClone(record), keepUntil);
    if (owner !== undefined) {
      const listed = this.owners.get(`${kind}:${owner}`) ?? new Map<string, number>();
      listed.set(id, this.clock.now());
      this.owners.set(`${kind}:${owner}`, listed);
    }
    return Promise.resolve();
  }

  record<K extends OAuthRecordKind>(kind: K, id: string): Promise<OAuthRecords[K] | undefined> {
    const found = this.records.get(`${kind}:${id}`) as OAuthRecords[K] | undefined;
    return Promise.resolve(found && structuredClone(found));
  }

  updateRecord<K extends OAuthRecordKind>(kind: K, id: string, record: OAuthRecords[K]): Promise<void> {
    const expiresAt = this.records.expiryOf(`${kind}:${id}`);
    if (expiresAt !== undefined) this.records.set(`${kind}:${id}`, structuredClone(record), expiresAt);
    return Promise.resolve();
  }

  useRecord<K extends 'code' | 'refresh' | 'authorization'>(
    kind: K,
    id: string,
    usedAt: number,
  ): Promise<{ record: OAuthRecords[K]; first: boolean } | undefined> {
    const key = `${kind}:${id}`;
    const found = this.records.get(key) as OAuthRecords[K] | undefined;
    const expiresAt = this.records.expiryOf(key);
    if (!found || expiresAt === undefined) return Promise.resolve(undefined);
    const first = found.usedAt === undefined;
    if (first) this.records.set(key, { ...structuredClone(found), usedAt }, expiresAt);
    return Promise.resolve({ record: structuredClone(found), first });
  }

  deleteRecord(kind: OAuthRecordKind, id: string): Promise<void> {
    this.records.delete(`${kind}:${id}`);
    return Promise.resolve();
  }

  recordsOf<K extends OAuthRecordKind>(kind: K, owner: string): Promise<OAuthRecords[K][]> {
    const listed = this.owners.get(`${kind}:${owner}`);
    if (!listed) return Promise.resolve([]);
    const found: OAuthRecords[K][] = [];
    for (const [id] of [...listed].sort(([, a], [, b]) => b - a)) {
      const record = this.records.get(`${kind}:${id}`) as OAuthRecords[K] | undefined;
      if (record === undefined) listed.delete(id);
      else found.push(structuredClone(record));
    }
    return Promise.resolve(found);
  }

  createFlow(flow: DeviceFlow): Promise<boolean> {
    if (this.codes.get(flow.userCode) !== undefined) return Promise.resolve(false);
    this.codes.set(flow.userCode, flow.deviceHash, flow.retainUntil);
    this.flows.set(flow.deviceHash, structuredClone(flow), flow.retainUntil);
    return Promise.resolve(true);
  }

  flowByDevice(deviceHash: string): Promise<DeviceFlow | undefined> {
    const flow = this.flows.get(deviceHash);
    return Promise.resolve(flow && structuredClone(flow));
  }

  flowByUserCode(userCode: string): Promise<DeviceFlow | undefined> {
    const hash = this.codes.get(userCode);
    return hash === undefined ? Promise.resolve(undefined) : this.flowByDevice(hash);
  }

  transitionFlow(from: DeviceFlowStatus, next: DeviceFlow): Promise<boolean> {
    const current = this.flows.get(next.deviceHash);
    const expiresAt = this.flows.expiryOf(next.deviceHash);
    if (current?.status !== from || expiresAt === undefined) return Promise.resolve(false);
    this.flows.set(next.deviceHash, structuredClone(next), expiresAt);
    return Promise.resolve(true);
  }

  takeFlow(deviceHash: string): Promise<DeviceFlow | undefined> {
    const flow = this.flows.get(deviceHash);
    if (flow) this.forget(flow);
    return Promise.resolve(flow);
  }

  deleteFlow(flow: DeviceFlow): Promise<void> {
    this.forget(flow);
    return Promise.resolve();
  }

  private forget(flow: DeviceFlow): void {
    this.flows.delete(flow.deviceHash);
    this.polls.delete(flow.deviceHash);
    if (this.codes.get(flow.userCode) === flow.deviceHash) this.codes.delete(flow.userCode);
  }

  admitPoll(flow: DeviceFlow, intervalMs: number): Promise<number> {
    const now = this.clock.now();
    const last = this.polls.get(flow.deviceHash);
    if (last !== undefined && now - last < intervalMs) return Promise.resolve(intervalMs - (now - last));
    this.polls.set(flow.deviceHash, now, flow.retainUntil);
    return Promise.resolve(0);
  }

  saveToken(token: TokenRecord, keepUntil: number): Promise<void> {
    this.tokens.set(token.hash, structuredClone(token), keepUntil);
    this.tokenIds.set(token.id, token.hash, keepUntil);
    const ofAgent = this.agentTokens.get(token.agentId) ?? new Set<string>();
    this.agentTokens.set(token.agentId, ofAgent.add(token.hash));
    const list = listOfToken(token);
    if (list !== undefined && isLiveToken(token, this.clock.now())) {
      const entries = this.lists.get(listKey(list, token.humanId)) ?? [];
      const key = positionKey(token);
      entries.splice(lowerBound(entries, key), 0, { key, hash: token.hash, expiresAt: token.expiresAt });
      this.lists.set(listKey(list, token.humanId), entries);
    }
    return Promise.resolve();
  }

  updateToken(token: TokenRecord): Promise<void> {
    const keepUntil = this.tokens.expiryOf(token.hash);
    if (keepUntil !== undefined) this.tokens.set(token.hash, structuredClone(token), keepUntil);
    const list = listOfToken(token);
    const entries = list === undefined ? undefined : this.lists.get(listKey(list, token.humanId));
    if (entries !== undefined) {
      const at = lowerBound(entries, positionKey(token));
      const entry = entries[at];
      // A revoked token leaves its list; one whose expiry was cut (a rotation) leaves it then.
      if (entry?.hash === token.hash && token.revokedAt !== undefined) entries.splice(at, 1);
      else if (entry?.hash === token.hash) entry.expiresAt = token.expiresAt;
    }
    return Promise.resolve();
  }

  tokenByHash(hash: string): Promise<TokenRecord | undefined> {
    const token = this.tokens.get(hash);
    return Promise.resolve(token && structuredClone(token));
  }

  tokenById(id: string): Promise<TokenRecord | undefined> {
    const hash = this.tokenIds.get(id);
    return hash === undefined ? Promise.resolve(undefined) : this.tokenByHash(hash);
  }

  liveTokensOfHuman(humanId: string, list: TokenList, limit: number, after?: TokenPosition): Promise<TokenPage> {
    const now = this.clock.now();
    // Tokens that expired since they were listed leave the list as it is read (their records are
    // kept a while longer, to answer token-expired).
    let entries = this.lists.get(listKey(list, humanId)) ?? [];
    if (entries.some((entry) => entry.expiresAt <= now)) {
      entries = entries.filter((entry) => entry.expiresAt > now);
      this.lists.set(listKey(list, humanId), entries);
    }
    // Oldest first here: the page is the `limit` entries just before `after`'s place, read backwards.
    const end = after === undefined ? entries.length : lowerBound(entries, positionKey(after));
    const start = Math.max(0, end - limit);
    const tokens = entries
      .slice(start, end)
      .reverse()
      .flatMap((entry) => {
        const token = this.tokens.get(entry.hash);
        return token === undefined ? [] : [structuredClone(token)];
      });
    return Promise.resolve({ tokens, total: entries.length, offset: entries.length - end, hasMore: start > 0 });
  }

  tokensOfAgent(agentId: string): Promise<TokenRecord[]> {
    const hashes = this.agentTokens.get(agentId);
    if (hashes === undefined) return Promise.resolve([]);
    const found: TokenRecord[] = [];
    for (const hash of hashes) {
      const token = this.tokens.get(hash);
      // Past its retention: gone from the agent's tokens too.
      if (token === undefined) hashes.delete(hash);
      else found.push(structuredClone(token));
    }
    if (hashes.size === 0) this.agentTokens.delete(agentId);
    return Promise.resolve(found.sort(newestFirst));
  }

  publishRevocation(revocation: Omit<Revocation, 'id'>): Promise<Revocation> {
    const published = { id: this.ids.next(), ...revocation };
    for (const watcher of this.revocationWatchers) watcher.revoked({ ...published });
    return Promise.resolve(published);
  }

  watchRevocations(watcher: RevocationWatcher): Promise<() => void> {
    this.revocationWatchers.add(watcher);
    if (this.heartbeat === undefined) {
      // One timer for every watcher; it keeps no process alive on its own.
      this.heartbeat = setInterval(() => {
        for (const each of this.revocationWatchers) each.alive();
      }, this.heartbeatMs);
      this.heartbeat.unref();
    }
    return Promise.resolve(() => {
      this.revocationWatchers.delete(watcher);
      if (this.revocationWatchers.size === 0) {
        clearInterval(this.heartbeat);
        this.heartbeat = undefined;
      }
    });
  }

  createHuman(human: Human): Promise<boolean> {
    const key = nameKey(human.name);
    if (this.names.has(key)) return Promise.resolve(false);
    this.names.set(key, human.id);
    this.humans.set(human.id, structuredClone(human));
    return Promise.resolve(true);
  }

  humanByName(name: string): Promise<Human | undefined> {
    const id = this.names.get(nameKey(name));
    return id === undefined ? Promise.resolve(undefined) : this.humanById(id);
  }

  humanById(id: string): Promise<Human | undefined> {
    const human = this.humans.get(id);
    return Promise.resolve(human && structuredClone(human));
  }

  saveSession(session: Session): Promise<void> {
    this.sessions.set(session.idHash, structuredClone(session), session.expiresAt);
    return Promise.resolve();
  }

  session(idHash: string): Promise<Session | undefined> {
    const session = this.sessions.get(idHash);
    return Promise.resolve(session && structuredClone(session));
  }

  deleteSession(idHash: string): Promise<void> {
    this.sessions.delete(idHash);
    return Promise.resolve();
  }

  countAttempt(key: string, windowMs: number): Promise<AttemptWindow> {
    const running = this.attemptWindows.get(key);
    const window = running ? { count: running.count + 1, resetAt: running.resetAt } : { count: 1, resetAt: this.clock.now() + windowMs };
    this.attemptWindows.set(key, window, window.resetAt);
    return Promise.resolve({ ...window });
  }

  attempts(key: string): Promise<AttemptWindow> {
    const running = this.attemptWindows.get(key);
    return Promise.resolve(running ? { ...running } : { count: 0, resetAt: 0 });
  }

  fillBucket(key: string, drainMs: number): Promise<number> {
    const now = this.clock.now();
    const level = drainedLevel(this.buckets.get(key), now, drainMs) + 1;
    this.buckets.set(key, { level, at: now }, now + Math.ceil(level * drainMs));
    return Promise.resolve(level);
  }

  bucketLevel(key: string, drainMs: number): Promise<number> {
    return Promise.resolve(drainedLevel(this.buckets.get(key), this.clock.now(), drainMs));
  }

  suspend(suspension: SuspensionRecord): Promise<{ held: SuspensionRecord; replaced: boolean }> {
    const current = this.liveSuspension(suspension.agentId);
    if (current?.by === 'moderator' && suspension.by === 'human') return Promise.resolve({ held: structuredClone(current), replaced: false });
    this.suspensions.set(suspension.agentId, structuredClone(suspension));
    return Promise.resolve({ held: structuredClone(suspension), replaced: true });
  }

  suspension(agentId: string): Promise<SuspensionRecord | undefined> {
    const current = this.liveSuspension(agentId);
    return Promise.resolve(current && structuredClone(current));
  }

  resume(agentId: string, by: SuspensionRecord['by']): Promise<'lifted' | 'none' | 'refused'> {
    const current = this.liveSuspension(agentId);
    if (current === undefined) return Promise.resolve('none');
    if (current.by === 'moderator' && by === 'human') return Promise.resolve('refused');
    this.suspensions.delete(agentId);
    return Promise.resolve('lifted');
  }

  /** The agent's suspension while it holds; one past its end is forgotten. */
  private liveSuspension(agentId: string): SuspensionRecord | undefined {
    const current = this.suspensions.get(agentId);
    if (current !== undefined && !suspensionHolds(current, this.clock.now())) this.suspensions.delete(agentId);
    return suspensionHolds(current, this.clock.now()) ? current : undefined;
  }

  setModerator(humanId: string, moderator: boolean): Promise<void> {
    if (moderator) this.moderatorIds.add(humanId);
    else this.moderatorIds.delete(humanId);
    return Promise.resolve();
  }

  moderators(): Promise<string[]> {
    return Promise.resolve([...this.moderatorIds]);
  }

  isModerator(humanId: string): Promise<boolean> {
    return Promise.resolve(this.moderatorIds.has(humanId));
  }

  ping(): Promise<void> {
    return Promise.resolve();
  }
}
