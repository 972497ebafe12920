import { hashSecret } from '@agentroom/kit/domain';
import { type Clock, duplicateClient, Keyspace, LuaScript, type RedisClient, type StreamEntry, streamFields, systemClock } from '@agentroom/kit/store';
import type { DeviceFlow, DeviceFlowStatus, Human, OAuthRecordKind, OAuthRecords, Session, SuspensionRecord, TokenRecord } from './records.js';
import {
  type AttemptWindow,
  type AuthStore,
  drainedLevel,
  isLiveToken,
  listOfToken,
  nameKey,
  positionKey,
  REVOCATION_FEED_LENGTH,
  REVOCATION_HEARTBEAT_MS,
  suspensionHolds,
  type Revocation,
  type RevocationFeedOptions,
  type RevocationWatcher,
  type TokenList,
  type TokenPage,
  type TokenPosition,
} from './store.js';

function parse<T>(json: string | null): T | undefined {
  return json === null ? undefined : (JSON.parse(json) as T);
}

/**
 * A page of one of a human's token lists. KEYS[1]: the list (score 0, members `positionKey`, so
 * their byte order is the list's); KEYS[2]: the same members scored by when each token expires;
 * KEYS[3]: the mark that the list is whole. ARGV[1]: now (the caller's clock); ARGV[2]: the newest
 * member the page may hold (`+`, or `(<member>` for the page after it); ARGV[3]: how many members.
 * Expired tokens leave both sets first. Answers nil while the list is not marked whole (it is then
 * filled from the index earlier versions kept), else { total, offset, members newest first }.
 */
const TOKEN_PAGE = new LuaScript(`
if redis.call('EXISTS', KEYS[3]) == 0 then return false end
local gone
repeat
  gone = redis.call('ZRANGE', KEYS[2], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, 500)
  if #gone > 0 then
    redis.call('ZREM', KEYS[1], unpack(gone))
    redis.call('ZREM', KEYS[2], unpack(gone))
  end
until #gone < 500
local offset = 0
if ARGV[2] ~= '+' then offset = redis.call('ZLEXCOUNT', KEYS[1], '[' .. string.sub(ARGV[2], 2), '+') end
return { redis.call('ZCARD', KEYS[1]), offset, redis.call('ZRANGE', KEYS[1], ARGV[2], '-', 'BYLEX', 'REV', 'LIMIT', 0, ARGV[3]) }
`);

// Compare-and-set on the flow's status: of two approvals (or an approval and a decline), one wins.
const TRANSITION = new LuaScript(`
local current = redis.call('GET', KEYS[1])
if not current or cjson.decode(current).status ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
return 1`);

// Time is the caller's clock (ARGV[1]), not Redis's, so the rule reads the same in both stores.
const ADMIT_POLL = new LuaScript(`
local last = tonumber(redis.call('GET', KEYS[1]))
local now = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
if last and now - last < interval then return interval - (now - last) end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
return 0`);

// A window starts with its first attempt and ends at resetAt on the caller's clock.
const COUNT_ATTEMPT = new LuaScript(`
local resetAt = tonumber(redis.call('HGET', KEYS[1], 'resetAt'))
if not resetAt or resetAt <= tonumber(ARGV[1]) then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'resetAt', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return {redis.call('HINCRBY', KEYS[1], 'count', 1), redis.call('HGET', KEYS[1], 'resetAt')}`);

// A leaky bucket: drain one per ARGV[2] ms since the last fill (caller's clock, ARGV[1]), add one.
// The level is fractional, so it travels as a string (Lua numbers come back as integers).
const FILL_BUCKET = new LuaScript(`
local now = tonumber(ARGV[1])
local drain = tonumber(ARGV[2])
local level = tonumber(redis.call('HGET', KEYS[1], 'level')) or 0
local at = tonumber(redis.call('HGET', KEYS[1], 'at')) or now
level = math.max(0, level - math.max(0, now - at) / drain) + 1
redis.call('HSET', KEYS[1], 'level', string.format('%.6f', level), 'at', ARGV[1])
redis.call('PEXPIRE', KEYS[1], math.ceil(level * drain))
return string.format('%.6f', level)`);

// A single-use record: the first use stamps usedAt (caller's clock, ARGV[1]) and answers 1; later ones 0.
const USE_RECORD = new LuaScript(`
local current = redis.call('GET', KEYS[1])
if not current then return false end
local record = cjson.decode(current)
if record.usedAt then return {current, 0} end
record.usedAt = tonumber(ARGV[1])
redis.call('SET', KEYS[1], cjson.encode(record), 'KEEPTTL')
return {current, 1}`);

// A suspension, one key an agent. ARGV[1]: the new one (JSON); ARGV[2]: who makes it; ARGV[3]: now
// (the caller's clock); ARGV[4]: its TTL in ms, or '' for none. A moderator's that still holds is
// answered, unchanged, to its human; else the new one replaces whatever was there.
const SUSPEND = new LuaScript(`
local current = redis.call('GET', KEYS[1])
if current and ARGV[2] == 'human' then
  local held = cjson.decode(current)
  if held.by == 'moderator' and (held['until'] == nil or held['until'] > tonumber(ARGV[3])) then return current end
end
if ARGV[4] == '' then redis.call('SET', KEYS[1], ARGV[1]) else redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[4]) end
return false`);

// Lifts a suspension. ARGV[1]: who lifts it; ARGV[2]: now. Answers 'lifted', 'none' or 'refused'.
const RESUME = new LuaScript(`
local current = redis.call('GET', KEYS[1])
if not current then return 'none' end
local held = cjson.decode(current)
if held['until'] ~= nil and held['until'] <= tonumber(ARGV[2]) then
  redis.call('DEL', KEYS[1])
  return 'none'
end
if held.by == 'moderator' and ARGV[1] == 'human' then return 'refused' end
redis.call('DEL', KEYS[1])
return 'lifted'`);

function toRevocation([id, fields]: StreamEntry): Revocation {
  const map = streamFields(fields);
  return { id, tokenId: map.get('tokenId') ?? '', agentId: map.get('agentId') ?? '', revokedAt: Number(map.get('revokedAt') ?? 0) };
}

/**
 * One process's reading of the revocation stream, shared by every watcher of that process: one
 * blocking connection, `XREAD BLOCK` from the newest entry when it started. Each round (at most
 * `heartbeatMs` long) tells the watchers the feed is alive. It ends when its last watcher leaves,
 * or when a read fails: then every watcher is told the feed broke, since a revocation might pass
 * unseen while it reconnects, and the next watch starts a new reading.
 */
class RevocationReading {
  private readonly watchers = new Set<RevocationWatcher>();
  private reader: RedisClient | undefined;
  private stopped = false;

  constructor(
    private readonly redis: RedisClient,
    private readonly key: string,
    private readonly heartbeatMs: number,
    private readonly ended: (reading: RevocationReading) => void,
  ) {}

  /** Positions the reading: resolves once every entry added from now on will be read. */
  async start(): Promise<void> {
    const [latest] = (await this.redis.xrevrange(this.key, '+', '-', 'COUNT', 1)) as StreamEntry[];
    // A failed read ends the reading (duplicateClient drops the connection's errors).
    const reader = duplicateClient(this.redis, 'auth-revocations');
    this.reader = reader;
    void this.readLoop(reader, latest?.[0] ?? '0-0');
  }

  add(watcher: RevocationWatcher): () => void {
    this.watchers.add(watcher);
    return () => {
      this.watchers.delete(watcher);
      if (this.watchers.size === 0) this.stop();
    };
  }

  get isStopped(): boolean {
    return this.stopped;
  }

  private stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.ended(this);
    // Ends the blocking read at once, rather than at the end of its round.
    this.reader?.disconnect();
  }

  /** Ends a reading that could not be positioned: its watchers are refused, not told it broke. */
  abandon(): void {
    this.watchers.clear();
    this.stop();
  }

  fail(error: Error): void {
    if (this.stopped) return;
    const watchers = [...this.watchers];
    this.watchers.clear();
    this.stop();
    for (const watcher of watchers) watcher.broken(error);
  }

  private async readLoop(reader: RedisClient, start: string): Promise<void> {
    let last = start;
    while (!this.stopped) {
      let reply: [string, StreamEntry[]][] | null;
      try {
        reply = (await reader.xread('COUNT', 500, 'BLOCK', this.heartbeatMs, 'STREAMS', this.key, last)) as [string, StreamEntry[]][] | null;
      } catch (error) {
        this.fail(error instanceof Error ? error : new Error(String(error)));
        return;
      }
      if (this.stopped) return;
      for (const [, entries] of reply ?? []) {
        for (const entry of entries) {
          last = entry[0];
          const revocation = toRevocation(entry);
          for (const watcher of this.watchers) watcher.revoked({ ...revocation });
        }
      }
      for (const watcher of this.watchers) watcher.alive();
    }
  }
}

/**
 * Auth's records in Redis. Each record has a hash tag of its own (`{flow:…}`, `{token:…}`, …) and a
 * flow's poll marker shares its flow's tag, so every command touches one slot and runs on Redis
 * Cluster. Whatever expires carries a TTL: flows, poll markers, tokens, sessions, attempt windows.
 */
export class RedisAuthStore implements AuthStore {
  readonly kind = 'redis';
  private readonly keys: Keyspace;
  private readonly heartbeatMs: number;
  /** The reading of the revocation feed that watchers of this process share, while there are any. */
  private reading: { reading: RevocationReading; positioned: Promise<void> } | undefined;

  constructor(
    private readonly redis: RedisClient,
    prefix: string,
    private readonly clock: Clock = systemClock,
    options: RevocationFeedOptions = {},
  ) {
    this.keys = new Keyspace(prefix, 'auth');
    this.heartbeatMs = options.heartbeatMs ?? REVOCATION_HEARTBEAT_MS;
  }

  /** Every auth replica's revocations, in one capped stream under a hash tag of its own. */
  private get revocationsKey(): string {
    return this.keys.key('revocations', 'feed');
  }

  /** Milliseconds from now until `at`, at least 1 (Redis refuses 0). */
  private ttl(at: number): number {
    return Math.max(1, Math.ceil(at - this.clock.now()));
  }

  private flowKey(hash: string): string {
    return this.keys.key(`flow:${hash}`);
  }

  private pollKey(hash: string): string {
    return this.keys.key(`flow:${hash}`, 'poll');
  }

  private codeKey(code: string): string {
    return this.keys.key(`code:${code}`);
  }

  private tokenKey(hash: string): string {
    return this.keys.key(`token:${hash}`);
  }

  private tokenIdKey(id: string): string {
    return this.keys.key(`token-id:${id}`);
  }

  /**
   * The index of every token of a human that versions before the lists kept (every kind, newest
   * first): read once per human, to fill the lists (`fillLists`), then deleted.
   */
  private humanTokensKey(humanId: string): string {
    return this.keys.key(`human:${humanId}`, 'tokens');
  }

  /** A human's live tokens in `list`, by `positionKey`; beside it, when each expires; and the mark that the lists are whole. */
  private listKeys(humanId: string, list: TokenList): [string, string, string] {
    const tag = `human:${humanId}`;
    return [this.keys.key(tag, list), this.keys.key(tag, `${list}-expiry`), this.keys.key(tag, 'lists')];
  }

  private agentTokensKey(agentId: string): string {
    return this.keys.key(`agent:${agentId}`, 'tokens');
  }

  /** Names are hashed: any character may appear in one, and keys should not list who has an account. */
  private nameKeyOf(name: string): string {
    return this.keys.key(`name:${hashSecret(nameKey(name))}`);
  }

  async createFlow(flow: DeviceFlow): Promise<boolean> {
    const ttl = this.ttl(flow.retainUntil);
    // The user code is claimed first: two flows can never share one.
    if ((await this.redis.set(this.codeKey(flow.userCode), flow.deviceHash, 'PX', ttl, 'NX')) !== 'OK') return false;
    await this.redis.set(this.flowKey(flow.deviceHash), JSON.stringify(flow), 'PX', ttl);
    return true;
  }

  async flowByDevice(deviceHash: string): Promise<DeviceFlow | undefined> {
    return parse<DeviceFlow>(await this.redis.get(this.flowKey(deviceHash)));
  }

  async flowByUserCode(userCode: string): Promise<DeviceFlow | undefined> {
    const hash = await this.redis.get(this.codeKey(userCode));
    return hash === null ? undefined : this.flowByDevice(hash);
  }

  async transitionFlow(from: DeviceFlowStatus, next: DeviceFlow): Promise<boolean> {
    return Number(await TRANSITION.run(this.redis, [this.flowKey(next.deviceHash)], [from, JSON.stringify(next)])) === 1;
  }

  async takeFlow(deviceHash: string): Promise<DeviceFlow | undefined> {
    const flow = parse<DeviceFlow>(await this.redis.getdel(this.flowKey(deviceHash)));
    if (flow) await this.forgetIndexes(flow);
    return flow;
  }

  async deleteFlow(flow: DeviceFlow): Promise<void> {
    await this.redis.del(this.flowKey(flow.deviceHash));
    await this.forgetIndexes(flow);
  }

  private async forgetIndexes(flow: DeviceFlow): Promise<void> {
    await this.redis.del(this.pollKey(flow.deviceHash));
    // Only if the code still points here: it is never reused while held, but be exact.
    if ((await this.redis.get(this.codeKey(flow.userCode))) === flow.deviceHash) await this.redis.del(this.codeKey(flow.userCode));
  }

  async admitPoll(flow: DeviceFlow, intervalMs: number): Promise<number> {
    const wait = await ADMIT_POLL.run(
      this.redis,
      [this.pollKey(flow.deviceHash)],
      [String(this.clock.now()), String(intervalMs), String(this.ttl(flow.retainUntil))],
    );
    return Number(wait);
  }

  async saveToken(token: TokenRecord, keepUntil: number): Promise<void> {
    const ttl = this.ttl(keepUntil);
    await this.redis.set(this.tokenKey(token.hash), JSON.stringify(token), 'PX', ttl);
    await this.redis.set(this.tokenIdKey(token.id), token.hash, 'PX', ttl);
    const agentKey = this.agentTokensKey(token.agentId);
    // An index lives as long as its longest-kept token: NX sets the first TTL, GT only extends it.
    await this.redis.multi().zadd(agentKey, token.createdAt, token.id).pexpire(agentKey, ttl, 'NX').pexpire(agentKey, ttl, 'GT').exec();
    await this.listToken(token);
  }

  /** Puts a live token in its human's list (none for a connection's). */
  private async listToken(token: TokenRecord): Promise<void> {
    const list = listOfToken(token);
    if (list === undefined || token.revokedAt !== undefined) return;
    const [listKey, expiryKey] = this.listKeys(token.humanId, list);
    const member = positionKey(token);
    // The lists hold live tokens only: each leaves them when it expires, so they live as long as the longest-lived.
    const live = this.ttl(token.expiresAt);
    await this.redis
      .multi()
      .zadd(listKey, 0, member)
      .zadd(expiryKey, token.expiresAt, member)
      .pexpire(listKey, live, 'NX')
      .pexpire(listKey, live, 'GT')
      .pexpire(expiryKey, live, 'NX')
      .pexpire(expiryKey, live, 'GT')
      .exec();
  }

  async updateToken(token: TokenRecord): Promise<void> {
    await this.redis.set(this.tokenKey(token.hash), JSON.stringify(token), 'KEEPTTL', 'XX');
    const list = listOfToken(token);
    if (list === undefined) return;
    const [listKey, expiryKey] = this.listKeys(token.humanId, list);
    const member = positionKey(token);
    // A revoked token leaves its list; one whose expiry was cut (a rotation) leaves it then.
    if (token.revokedAt === undefined) await this.redis.zadd(expiryKey, 'XX', token.expiresAt, member);
    else await this.redis.multi().zrem(listKey, member).zrem(expiryKey, member).exec();
  }

  async tokenByHash(hash: string): Promise<TokenRecord | undefined> {
    return parse<TokenRecord>(await this.redis.get(this.tokenKey(hash)));
  }

  async tokenById(id: string): Promise<TokenRecord | undefined> {
    const hash = await this.redis.get(this.tokenIdKey(id));
    return hash === null ? undefined : this.tokenByHash(hash);
  }

  private async tokensIn(setKey: string): Promise<TokenRecord[]> {
    const ids = await this.redis.zrevrange(setKey, 0, -1);
    const tokens = await Promise.all(ids.map((id) => this.tokenById(id)));
    // Tokens past their retention are gone; their index entries go with them.
    const gone = ids.filter((_, i) => tokens[i] === undefined);
    if (gone.length > 0) await this.redis.zrem(setKey, ...gone);
    return tokens.filter((token): token is TokenRecord => token !== undefined);
  }

  async liveTokensOfHuman(humanId: string, list: TokenList, limit: number, after?: TokenPosition): Promise<TokenPage> {
    const keys = this.listKeys(humanId, list);
    const newest = after === undefined ? '+' : `(${positionKey(after)}`;
    // A token revoked or expired between the page's read and its records' leaves a page short: read it again.
    const read = async (): Promise<[number, number, string[]] | null> =>
      (await TOKEN_PAGE.run(this.redis, keys, [String(this.clock.now()), newest, String(limit + 1)])) as [number, number, string[]] | null;
    for (let attempt = 1; ; attempt += 1) {
      let answer = await read();
      if (answer === null) {
        await this.fillLists(humanId);
        answer = (await read()) as [number, number, string[]];
      }
      const [total, offset, members] = answer;
      const shown = members.slice(0, limit);
      const records = await Promise.all(shown.map((member) => this.tokenById(member.slice(member.indexOf('.') + 1))));
      const now = this.clock.now();
      const dead = shown.filter((_, i) => !isLiveRecord(records[i], now));
      if (dead.length === 0 || attempt === 3) {
        return { tokens: records.filter((record): record is TokenRecord => isLiveRecord(record, now)), total, offset, hasMore: members.length > limit };
      }
      await this.redis
        .multi()
        .zrem(keys[0], ...dead)
        .zrem(keys[1], ...dead)
        .exec();
    }
  }

  /**
   * Fills a human's lists from the index that versions before them kept, once: its live tokens go in
   * their list, the lists are marked whole (a mark without a TTL, as the human has none), and the old
   * index is deleted. Tokens made meanwhile are added by their own save; adding one twice is harmless.
   */
  private async fillLists(humanId: string): Promise<void> {
    const now = this.clock.now();
    for (const token of await this.tokensIn(this.humanTokensKey(humanId))) {
      if (isLiveRecord(token, now)) await this.listToken(token);
    }
    const [, , mark] = this.listKeys(humanId, 'approved');
    await this.redis.multi().set(mark, '1').del(this.humanTokensKey(humanId)).exec();
  }

  tokensOfAgent(agentId: string): Promise<TokenRecord[]> {
    return this.tokensIn(this.agentTokensKey(agentId));
  }

  async publishRevocation(revocation: Omit<Revocation, 'id'>): Promise<Revocation> {
    const id = await this.redis.xadd(
      this.revocationsKey,
      'MAXLEN',
      '~',
      String(REVOCATION_FEED_LENGTH),
      '*',
      'tokenId',
      revocation.tokenId,
      'agentId',
      revocation.agentId,
      'revokedAt',
      String(revocation.revokedAt),
    );
    if (id === null) throw new Error('XADD returned no id');
    return { id, ...revocation };
  }

  async watchRevocations(watcher: RevocationWatcher): Promise<() => void> {
    let current = this.reading;
    if (!current || current.reading.isStopped) {
      const reading = new RevocationReading(this.redis, this.revocationsKey, this.heartbeatMs, (ended) => {
        if (this.reading?.reading === ended) this.reading = undefined;
      });
      current = { reading, positioned: reading.start() };
      this.reading = current;
    }
    // Joined before positioning completes, so a watcher added now misses nothing the reading reads.
    const stop = current.reading.add(watcher);
    try {
      await current.positioned;
    } catch (error) {
      // Every watcher of this reading is waiting here and hears the rejection; none is told twice.
      current.reading.abandon();
      throw error;
    }
    return stop;
  }

  private recordKey(kind: OAuthRecordKind, id: string): string {
    return this.keys.key(`${kind}:${hashSecret(id)}`);
  }

  private ownerKey(kind: OAuthRecordKind, owner: string): string {
    return this.keys.key(`${kind}-of:${owner}`);
  }

  async putRecord<K extends OAuthRecordKind>(kind: K, id: string, record: OAuthRecords[K], keepUntil: number, owner?: string): Promise<void> {
    const ttl = this.ttl(keepUntil);
    await this.redis.set(this.recordKey(kind, id), JSON.stringify(record), 'PX', ttl);
    if (owner !== undefined) {
      const key = this.ownerKey(kind, owner);
      // The list lives as long as its longest-kept record, as the token indexes do.
      await this.redis.multi().zadd(key, this.clock.now(), id).pexpire(key, ttl, 'NX').pexpire(key, ttl, 'GT').exec();
    }
  }

  async record<K extends OAuthRecordKind>(kind: K, id: string): Promise<OAuthRecords[K] | undefined> {
    return parse<OAuthRecords[K]>(await this.redis.get(this.recordKey(kind, id)));
  }

  async updateRecord<K extends OAuthRecordKind>(kind: K, id: string, record: OAuthRecords[K]): Promise<void> {
    await this.redis.set(this.recordKey(kind, id), JSON.stringify(record), 'KEEPTTL', 'XX');
  }

  async useRecord<K extends 'code' | 'refresh' | 'authorization'>(
    kind: K,
    id: string,
    usedAt: number,
  ): Promise<{ record: OAuthRecords[K]; first: boolean } | undefined> {
    const reply = (await USE_RECORD.run(this.redis, [this.recordKey(kind, id)], [String(usedAt)])) as [string, number] | null;
    if (!reply) return undefined;
    return { record: JSON.parse(reply[0]) as OAuthRecords[K], first: Number(reply[1]) === 1 };
  }

  async deleteRecord(kind: OAuthRecordKind, id: string): Promise<void> {
    await this.redis.del(this.recordKey(kind, id));
  }

  async recordsOf<K extends OAuthRecordKind>(kind: K, owner: string): Promise<OAuthRecords[K][]> {
    const key = this.ownerKey(kind, owner);
    const ids = await this.redis.zrevrange(key, 0, -1);
    const records = await Promise.all(ids.map((id) => this.record(kind, id)));
    const gone = ids.filter((_, i) => records[i] === undefined);
    if (gone.length > 0) await this.redis.zrem(key, ...gone);
    return records.filter((record): record is Awaited<typeof record> & object => record !== undefined);
  }

  async createHuman(human: Human): Promise<boolean> {
    const claimed = await this.redis.set(this.nameKeyOf(human.name), human.id, 'NX');
    if (claimed !== 'OK') return false;
    await this.redis.set(this.keys.key(`human:${human.id}`), JSON.stringify(human));
    return true;
  }

  async humanByName(name: string): Promise<Human | undefined> {
    const id = await this.redis.get(this.nameKeyOf(name));
    return id === null ? undefined : this.humanById(id);
  }

  async humanById(id: string): Promise<Human | undefined> {
    return parse<Human>(await this.redis.get(this.keys.key(`human:${id}`)));
  }

  async saveSession(session: Session): Promise<void> {
    await this.redis.set(this.keys.key(`session:${session.idHash}`), JSON.stringify(session), 'PX', this.ttl(session.expiresAt));
  }

  async session(idHash: string): Promise<Session | undefined> {
    return parse<Session>(await this.redis.get(this.keys.key(`session:${idHash}`)));
  }

  async deleteSession(idHash: string): Promise<void> {
    await this.redis.del(this.keys.key(`session:${idHash}`));
  }

  async countAttempt(key: string, windowMs: number): Promise<AttemptWindow> {
    const now = this.clock.now();
    const reply = await COUNT_ATTEMPT.run(this.redis, [this.keys.key(`attempts:${key}`)], [String(now), String(now + windowMs), String(windowMs)]);
    const [count, resetAt] = reply as [number, string];
    return { count: Number(count), resetAt: Number(resetAt) };
  }

  async attempts(key: string): Promise<AttemptWindow> {
    const [count, resetAt] = await this.redis.hmget(this.keys.key(`attempts:${key}`), 'count', 'resetAt');
    if (count === null || resetAt === null || Number(resetAt) <= this.clock.now()) return { count: 0, resetAt: 0 };
    return { count: Number(count), resetAt: Number(resetAt) };
  }

  async fillBucket(key: string, drainMs: number): Promise<number> {
    return Number(await FILL_BUCKET.run(this.redis, [this.keys.key(`bucket:${key}`)], [String(this.clock.now()), String(drainMs)]));
  }

  async bucketLevel(key: string, drainMs: number): Promise<number> {
    const [level, at] = await this.redis.hmget(this.keys.key(`bucket:${key}`), 'level', 'at');
    if (level === null || at === null) return 0;
    return drainedLevel({ level: Number(level), at: Number(at) }, this.clock.now(), drainMs);
  }

  private suspensionKey(agentId: string): string {
    return this.keys.key(`agent:${agentId}`, 'suspension');
  }

  /** The room's moderators: one set, under a hash tag of its own. */
  private get moderatorsKey(): string {
    return this.keys.key('moderators');
  }

  async suspend(suspension: SuspensionRecord): Promise<{ held: SuspensionRecord; replaced: boolean }> {
    const ttl = suspension.until === undefined ? '' : String(this.ttl(suspension.until));
    const held = await SUSPEND.run(
      this.redis,
      [this.suspensionKey(suspension.agentId)],
      [JSON.stringify(suspension), suspension.by, String(this.clock.now()), ttl],
    );
    return typeof held === 'string' ? { held: JSON.parse(held) as SuspensionRecord, replaced: false } : { held: suspension, replaced: true };
  }

  async suspension(agentId: string): Promise<SuspensionRecord | undefined> {
    // Past its end on the caller's clock it is over, whether or not Redis has let the key go yet.
    const current = parse<SuspensionRecord>(await this.redis.get(this.suspensionKey(agentId)));
    return suspensionHolds(current, this.clock.now()) ? current : undefined;
  }

  async resume(agentId: string, by: SuspensionRecord['by']): Promise<'lifted' | 'none' | 'refused'> {
    const answer = await RESUME.run(this.redis, [this.suspensionKey(agentId)], [by, String(this.clock.now())]);
    return answer === 'lifted' || answer === 'refused' ? answer : 'none';
  }

  async setModerator(humanId: string, moderator: boolean): Promise<void> {
    if (moderator) await this.redis.sadd(this.moderatorsKey, humanId);
    else await this.redis.srem(this.moderatorsKey, humanId);
  }

  async moderators(): Promise<string[]> {
    return this.redis.smembers(this.moderatorsKey);
  }

  async isModerator(humanId: string): Promise<boolean> {
    return (await this.redis.sismember(this.moderatorsKey, humanId)) === 1;
  }

  async ping(): Promise<void> {
    await this.redis.ping();
  }
}

/** A token record that still works: found, and live (`isLiveToken`). */
function isLiveRecord(token: TokenRecord | undefined, now: number): token is TokenRecord {
  return token !== undefined && isLiveToken(token, now);
}
