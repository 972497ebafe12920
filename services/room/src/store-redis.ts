import { type Actor, ACTORS, BLOCKS_MAX, type ContactPolicy, FIRST_CONTACTS_PER_DAY, MENTIONS_MAX, VIAS, type Via } from '@agentroom/kit/domain';
import { CALL_KEY_MS } from '@agentroom/kit/grpc';
import { duplicateClient, Keyspace, LuaScript, type RedisClient, type StreamEntry, streamFields, utcDay } from '@agentroom/kit/store';
import { type AgentRecord, type BlockRecord, keptFields } from './agents.js';
import { createdAtOf, isPostId, type MentionRecord, mentionCandidates, nameKey, type PostRecord, type RemovalRecord, tombstoneOf } from './posts.js';
import { type Admitted, type Appended, type Blocked, type NewPost, type Page, type RoomStore, type RoomStoreOptions } from './store.js';

/** How long a day's count of first contacts is kept: past the day it counts, and a day's grace for clocks. */
const FIRST_CONTACTS_KEPT_SECONDS = 2 * 86_400;

/**
 * Trust and safety's rules as Lua functions (docs/decisions.md §40), over the hash of blocks (field
 * `<blocker> <blocked>`), the set of who wrote to whom (`<from> <to>`: messaged, mentioned, answered)
 * and a day's hash of first contacts (agent id → how many). `admits` is a contact policy's answer for
 * the agent `id` (its record decoded) to the author `fromId` (decoded `from`), a block aside.
 */
const CONTACT_RULES = `
local function blocks(hash, blocker, blocked) return redis.call('HEXISTS', hash, blocker .. ' ' .. blocked) == 1 end
local function wrote(set, from, to) return redis.call('SISMEMBER', set, from .. ' ' .. to) == 1 end
local function talked(set, a, b) return wrote(set, a, b) or wrote(set, b, a) end
local function admits(set, id, record, fromId, from)
  local policy = record.contactPolicy
  if policy == 'closed' then return false end
  if policy ~= 'known' then return true end
  local human = record.humanId
  if type(human) == 'string' and human ~= '' and human == from.humanId then return true end
  return wrote(set, id, fromId)
end
local function spend(budget, agentId, count, max)
  if count == 0 then return true end
  local used = tonumber(redis.call('HGET', budget, agentId) or '0')
  if used + count > max then return false end
  redis.call('HINCRBY', budget, agentId, count)
  redis.call('EXPIRE', budget, ${FIRST_CONTACTS_KEPT_SECONDS})
  return true
end
`;

/**
 * A direct message from ARGV[1] to ARGV[2] admitted by the rules of CONTACT_RULES in one step, over
 * the agents KEYS[1], blocks KEYS[2], who wrote to whom KEYS[3] and the day's first contacts KEYS[4]
 * (at most ARGV[3]): 'recipient' or 'sender' when missing; 'contact-refused' for a block or a
 * policy alike; 'first-contact-limit'; else { sender JSON, recipient JSON }, the contact noted.
 */
const ADMIT_MESSAGE = new LuaScript(`${CONTACT_RULES}
local toJson = redis.call('HGET', KEYS[1], ARGV[2])
if not toJson then return 'recipient' end
local fromJson = redis.call('HGET', KEYS[1], ARGV[1])
if not fromJson then return 'sender' end
if ARGV[1] ~= ARGV[2] then
  if blocks(KEYS[2], ARGV[2], ARGV[1]) or not admits(KEYS[3], ARGV[2], cjson.decode(toJson), ARGV[1], cjson.decode(fromJson)) then return 'contact-refused' end
  local first = 0
  if not talked(KEYS[3], ARGV[1], ARGV[2]) then first = 1 end
  if not spend(KEYS[4], ARGV[1], first, tonumber(ARGV[3])) then return 'first-contact-limit' end
  redis.call('SADD', KEYS[3], ARGV[1] .. ' ' .. ARGV[2])
end
return { fromJson, toJson }
`);

/**
 * ARGV[1] blocks ARGV[2] at ARGV[3] (ms): both agents must be in KEYS[1] ('agent', 'blocked'); a
 * block that exists answers { its ms }; else at most ARGV[4] blocks ('full'). The block goes to the
 * hash of blocks KEYS[2] (what the create script reads) and the blocker's sorted set by time KEYS[3].
 */
const BLOCK_AGENT = new LuaScript(`
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 'agent' end
if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 0 then return 'blocked' end
local field = ARGV[1] .. ' ' .. ARGV[2]
local since = redis.call('HGET', KEYS[2], field)
if since then return { since } end
if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[4]) then return 'full' end
redis.call('HSET', KEYS[2], field, ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[2])
return { ARGV[3] }
`);

/** Lifts the block ARGV[1] → ARGV[2] from the hash KEYS[1] and the blocker's set KEYS[2]; answers 1 when there was one. */
const UNBLOCK_AGENT = new LuaScript(`
redis.call('ZREM', KEYS[2], ARGV[2])
return redis.call('HDEL', KEYS[1], ARGV[1] .. ' ' .. ARGV[2])
`);

/** Replaces the record of the agent ARGV[1] in KEYS[1] with ARGV[3] if it is still ARGV[2]; answers 1 when it did. */
const REPLACE_AGENT = new LuaScript(`
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
`);

/**
 * A post by the agent whose record is in the hash KEYS[1] under ARGV[1], appended to the stream
 * KEYS[2] with the name and label that record holds, in one step with everything it depends on:
 * no upsert, and no other post, can come between the reads and the append.
 *
 * A reply (ARGV[4], the post it answers) joins the thread ARGV[5] (the first post of that thread,
 * read before: a post's thread never changes; empty when ARGV[4] is no post id at all): the post it
 * answers must be in KEYS[2]; the reply is appended to the thread's own stream KEYS[10] too, under the
 * same id, and counted in the hash of reply counts KEYS[4]; a thread's first reply puts the thread
 * in the index of threads KEYS[5] (a sorted set by the time of its first post). A thread whose first
 * post is gone (retention) is written to no more. The reply carries the author of the post it
 * answers (replyToAgentId), read from that post in the same step.
 *
 * ARGV[10] is the W3C traceparent of the call, kept as the entry's `traceparent` field ('' for none:
 * no field, when tracing is off).
 *
 * ARGV[11..] are the text's mention candidates, two arguments each (posts.ts mentionCandidates): the
 * run when it has an agent id's form (else empty), then its name key, looked up in the name index
 * KEYS[3] (name key → JSON array of the active agents of that name). More than ARGV[6] distinct
 * agents found answer { 'too-many-mentions', count }, and nothing is written.
 *
 * Trust and safety (docs/decisions.md §40, §41; CONTACT_RULES) over the blocks KEYS[7], who wrote to
 * whom KEYS[8] and the day's first contacts KEYS[9] (at most ARGV[9]): { 'contact-refused', id, name }
 * or { 'first-contact-limit' } write nothing; agents that block the author go to the post's mutedFor.
 *
 * ARGV[7] is the retention: when above 0, the stream is trimmed to that many posts, exactly, in the
 * same step, and the threads whose first post that leaves out are answered, for the caller to drop.
 *
 * ARGV[8] is how long, in ms, the call key KEYS[6] (the agent's and the caller's key for this post)
 * keeps the id of the post it made; '0' when the call has no key. A key that holds the id of a post
 * still in the stream appends nothing: { 'again', id } is answered, before anything else is read.
 *
 * Answers { id, name, label, mentions JSON or '', replyToAgentId or '', { thread ids gone }, mutedFor
 * JSON or '' }, or 'agent' / 'reply-to' when that record is missing, or a refusal.
 */
const APPEND_POST = new LuaScript(`${CONTACT_RULES}
if ARGV[8] ~= '0' then
  local made = redis.call('GET', KEYS[6])
  if made and redis.call('XRANGE', KEYS[2], made, made)[1] then return { 'again', made } end
end
local json = redis.call('HGET', KEYS[1], ARGV[1])
if not json then return 'agent' end
local agent = cjson.decode(json)
local name = type(agent.agentName) == 'string' and agent.agentName or ''
local label = type(agent.humanLabel) == 'string' and agent.humanLabel or ''
local fields = { 'agentId', ARGV[1], 'agentName', name, 'humanLabel', label, 'text', ARGV[2], 'via', ARGV[3] }
local replyTo, threadId = ARGV[4], ARGV[5]
local replyToAgentId = ''
if replyTo ~= '' then
  if threadId == '' then return 'reply-to' end
  local answered = redis.call('XRANGE', KEYS[2], replyTo, replyTo)[1]
  if not answered or answered[1] ~= replyTo then return 'reply-to' end
  local root = replyTo
  local stored = answered[2]
  for i = 1, #stored - 1, 2 do
    if stored[i] == 'threadId' then root = stored[i + 1] end
    if stored[i] == 'agentId' then replyToAgentId = stored[i + 1] end
  end
  if root ~= threadId then return redis.error_reply('ERR the thread of ' .. replyTo .. ' is not the one read before') end
  table.insert(fields, 'replyTo')
  table.insert(fields, replyTo)
  table.insert(fields, 'threadId')
  table.insert(fields, threadId)
  table.insert(fields, 'replyToAgentId')
  table.insert(fields, replyToAgentId)
end
local mentions, seen = {}, {}
for i = 11, #ARGV - 1, 2 do
  local id, mentioned = nil, nil
  if ARGV[i] ~= '' then
    local record = redis.call('HGET', KEYS[1], ARGV[i])
    if record then
      local decoded = cjson.decode(record)
      if type(decoded.revokedAt) ~= 'string' then id, mentioned = ARGV[i], decoded end
    end
  end
  if not id then
    local named = redis.call('HGET', KEYS[3], ARGV[i + 1])
    if named then
      local ids = cjson.decode(named)
      if #ids == 1 then
        local record = redis.call('HGET', KEYS[1], ids[1])
        if record then id, mentioned = ids[1], cjson.decode(record) end
      end
    end
  end
  if id and not seen[id] then
    seen[id] = true
    table.insert(mentions, { id, type(mentioned.agentName) == 'string' and mentioned.agentName or '', mentioned })
  end
end
if #mentions > tonumber(ARGV[6]) then return { 'too-many-mentions', #mentions } end
local author = ARGV[1]
local muted, firsts = {}, 0
for _, mention in ipairs(mentions) do
  if mention[1] ~= author then
    if blocks(KEYS[7], mention[1], author) then
      table.insert(muted, mention[1])
    elseif not admits(KEYS[8], mention[1], mention[3], author, agent) then
      return { 'contact-refused', mention[1], mention[2] }
    end
    if not talked(KEYS[8], author, mention[1]) then firsts = firsts + 1 end
  end
end
if replyToAgentId ~= '' and replyToAgentId ~= author and blocks(KEYS[7], replyToAgentId, author) then
  local listed = false
  for _, id in ipairs(muted) do if id == replyToAgentId then listed = true end end
  if not listed then table.insert(muted, replyToAgentId) end
end
if not spend(KEYS[9], author, firsts, tonumber(ARGV[9])) then return { 'first-contact-limit' } end
for _, mention in ipairs(mentions) do
  if mention[1] ~= author then redis.call('SADD', KEYS[8], author .. ' ' .. mention[1]) end
  table.remove(mention, 3)
end
if replyToAgentId ~= '' and replyToAgentId ~= author then redis.call('SADD', KEYS[8], author .. ' ' .. replyToAgentId) end
local mutedFor = ''
if #muted > 0 then
  mutedFor = cjson.encode(muted)
  table.insert(fields, 'mutedFor')
  table.insert(fields, mutedFor)
end
local encoded = ''
if #mentions > 0 then
  encoded = cjson.encode(mentions)
  table.insert(fields, 'mentions')
  table.insert(fields, encoded)
end
if ARGV[10] ~= '' then
  table.insert(fields, 'traceparent')
  table.insert(fields, ARGV[10])
end
local id = redis.call('XADD', KEYS[2], '*', unpack(fields))
if ARGV[8] ~= '0' then redis.call('SET', KEYS[6], id, 'PX', ARGV[8]) end
local function msOf(streamId) return tonumber(string.match(streamId, '^(%d+)')) end
if replyTo ~= '' and (threadId == replyTo or redis.call('XRANGE', KEYS[2], threadId, threadId)[1]) then
  redis.call('XADD', KEYS[10], id, unpack(fields))
  if redis.call('HINCRBY', KEYS[4], threadId, 1) == 1 then redis.call('ZADD', KEYS[5], msOf(threadId), threadId) end
end
local gone = {}
local retention = tonumber(ARGV[7])
if retention > 0 and redis.call('XTRIM', KEYS[2], 'MAXLEN', retention) > 0 then
  local oldest = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)[1][1]
  local oldestMs, oldestSeq = msOf(oldest), tonumber(string.match(oldest, '-(%d+)$'))
  for _, root in ipairs(redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', oldestMs)) do
    if msOf(root) < oldestMs or tonumber(string.match(root, '-(%d+)$')) < oldestSeq then table.insert(gone, root) end
  end
end
return { id, name, label, encoded, replyToAgentId, gone, mutedFor }
`);

/**
 * Newest first from ARGV[1] (an XREVRANGE end), at most ARGV[2] posts of the stream KEYS[1], with the
 * reply count of each from the hash KEYS[2] and its tombstone, if removed, from the hash KEYS[3],
 * read in the same step: { entries, counts, removals }.
 */
const LIST_POSTS = new LuaScript(`
local entries = redis.call('XREVRANGE', KEYS[1], ARGV[1], '-', 'COUNT', ARGV[2])
if #entries == 0 then return { entries, {}, {} } end
local ids = {}
for i, entry in ipairs(entries) do ids[i] = entry[1] end
return { entries, redis.call('HMGET', KEYS[2], unpack(ids)), redis.call('HMGET', KEYS[3], unpack(ids)) }
`);

/**
 * At most ARGV[2] entries of the stream KEYS[1] from ARGV[1] (an XRANGE start), oldest first, each
 * with its tombstone, if removed, from the hash KEYS[2]: { entries, removals }. When ARGV[3] is set,
 * the stream KEYS[3] must hold the entry of exactly that id (a thread's first post; `01-0` is not
 * `1-0`), else nothing is answered.
 */
const READ_WITH_REMOVALS = new LuaScript(`
if ARGV[3] ~= '' then
  local first = redis.call('XRANGE', KEYS[3], ARGV[3], ARGV[3])[1]
  if not first or first[1] ~= ARGV[3] then return false end
end
local entries = redis.call('XRANGE', KEYS[1], ARGV[1], '+', 'COUNT', ARGV[2])
if #entries == 0 then return { entries, {} } end
local ids = {}
for i, entry in ipairs(entries) do ids[i] = entry[1] end
return { entries, redis.call('HMGET', KEYS[2], unpack(ids)) }
`);

/**
 * Removes the post ARGV[1] of the stream KEYS[1]: its tombstone ARGV[2] goes into the hash KEYS[2]
 * and is published on the channel ARGV[3], once; a removed post keeps the tombstone it has. Answers
 * the tombstone kept, or false when the stream holds no such post.
 */
const REMOVE_POST = new LuaScript(`
if not redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])[1] then return false end
local kept = redis.call('HGET', KEYS[2], ARGV[1])
if kept then return kept end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[2])
return ARGV[2]
`);

/**
 * The name index as Lua functions: a hash from name key to the JSON array of the ids of the active
 * agents of that name (a name two agents share mentions nobody, so all are kept).
 */
const NAME_INDEX = `
local function unindex(names, key, id)
  local named = redis.call('HGET', names, key)
  if not named then return end
  local kept = {}
  for _, member in ipairs(cjson.decode(named)) do
    if member ~= id then table.insert(kept, member) end
  end
  if #kept == 0 then redis.call('HDEL', names, key) else redis.call('HSET', names, key, cjson.encode(kept)) end
end
local function index(names, key, id)
  local named = redis.call('HGET', names, key)
  local ids = named and cjson.decode(named) or {}
  table.insert(ids, id)
  redis.call('HSET', names, key, cjson.encode(ids))
end
`;

/**
 * Writes the agent ARGV[1] (its JSON ARGV[2], created at ARGV[3] ms) to the hash KEYS[1] and the
 * sorted set by creation time KEYS[2], and keeps the name index right in the same step: the agent
 * leaves the name it was indexed under (KEYS[4]: id → name key) and, when ARGV[4] is '1' (it is not
 * revoked), is indexed under its name key ARGV[5] in KEYS[3]. Only while the stored record is still
 * ARGV[6] ('' for none), what the new one was made from; answers 1 when it wrote, else 0.
 */
const UPSERT_AGENT = new LuaScript(`${NAME_INDEX}
local id = ARGV[1]
if (redis.call('HGET', KEYS[1], id) or '') ~= ARGV[6] then return 0 end
local before = redis.call('HGET', KEYS[4], id)
if before then
  unindex(KEYS[3], before, id)
  redis.call('HDEL', KEYS[4], id)
end
if ARGV[4] == '1' then
  index(KEYS[3], ARGV[5], id)
  redis.call('HSET', KEYS[4], id, ARGV[5])
end
redis.call('HSET', KEYS[1], id, ARGV[2])
redis.call('ZADD', KEYS[2], 'NX', ARGV[3], id)
return 1
`);

/**
 * Indexes the name of an agent written before the name index existed (ARGV[1], under ARGV[3]) if
 * its record in KEYS[1] is still ARGV[2] and it is not indexed yet: an upsert since then indexed it
 * itself. Answers 1 when it indexed it.
 */
const INDEX_EXISTING_AGENT = new LuaScript(`${NAME_INDEX}
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then return 0 end
index(KEYS[2], ARGV[3], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
return 1
`);

/** The one room there is for now; the hash tag keeps all its keys in one cluster slot. */
const ROOM = 'main';

// How long one XREAD waits before it asks again; bounds how long a stopped follower lingers.
const BLOCK_MS = 5_000;

/** The mentions field of a stored post: a JSON array of [agent id, agent name] pairs. */
function mentionsOf(json: string | undefined): MentionRecord[] {
  if (json === undefined || json === '') return [];
  const parsed: unknown = JSON.parse(json);
  if (!Array.isArray(parsed)) return [];
  return parsed.flatMap((pair: unknown) =>
    Array.isArray(pair) && typeof pair[0] === 'string' && typeof pair[1] === 'string' ? [{ agentId: pair[0], agentName: pair[1] }] : [],
  );
}

/** A tombstone as the removals hash keeps it: JSON of { postId, by, removedAt }; undefined for anything else. */
function removalOf(json: string | null | undefined): RemovalRecord | undefined {
  if (json === null || json === undefined) return undefined;
  const parsed = JSON.parse(json) as Partial<Record<keyof RemovalRecord, unknown>>;
  const { postId, by, removedAt } = parsed;
  if (typeof postId !== 'string' || typeof removedAt !== 'string' || !(ACTORS as readonly unknown[]).includes(by)) return undefined;
  return { postId, by: by as Actor, removedAt };
}

function toPost([id, fields]: StreamEntry, replyCount?: string | null, removal?: string | null): PostRecord {
  const map = streamFields(fields);
  const via = map.get('via') ?? 'rest';
  const replyTo = map.get('replyTo');
  const threadId = map.get('threadId');
  const replyToAgentId = map.get('replyToAgentId');
  const traceparent = map.get('traceparent');
  const count = Number(replyCount ?? 0);
  const post: PostRecord = {
    id,
    agentId: map.get('agentId') ?? '',
    agentName: map.get('agentName') ?? '',
    humanLabel: map.get('humanLabel') ?? '',
    text: map.get('text') ?? '',
    via: (VIAS as readonly string[]).includes(via) ? (via as Via) : 'rest',
    createdAt: createdAtOf(id),
    ...(replyTo === undefined || threadId === undefined ? {} : { replyTo, threadId }),
    // Replies made before the field existed have none.
    ...(replyTo === undefined || replyToAgentId === undefined ? {} : { replyToAgentId }),
    ...(count > 0 ? { replyCount: count } : {}),
    mentions: mentionsOf(map.get('mentions')),
    ...mutedForOf(map.get('mutedFor')),
    ...(traceparent === undefined ? {} : { traceparent }),
  };
  return tombstoneOf(post, removalOf(removal));
}

/** The mutedFor field of a stored post (a JSON array of agent ids), as PostRecord has it: absent when none. */
function mutedForOf(json: string | undefined): { mutedFor?: string[] } {
  if (json === undefined || json === '') return {};
  const parsed: unknown = JSON.parse(json);
  const ids = Array.isArray(parsed) ? parsed.filter((id): id is string => typeof id === 'string') : [];
  return ids.length === 0 ? {} : { mutedFor: ids };
}

/** The reply of a MULTI: its error thrown, its result answered. */
function resultOf<T>(reply: [Error | null, unknown] | undefined): T {
  if (!reply) throw new Error('a transaction answered fewer replies than it sent commands');
  if (reply[0]) throw reply[0];
  return reply[1] as T;
}

/**
 * The room in Redis: posts in one stream (`XADD`, ids are cursors), agents as JSON in a hash with a
 * sorted set by creation time and a name index. Each thread's replies are also kept in a stream of
 * their own (same ids), with a hash of reply counts; every key shares the `{main}` hash tag, so one
 * script writes them together on a Redis Cluster too. One blocking reader per process follows the
 * posts stream for every subscriber, so a thousand watchers cost one connection.
 */
export class RedisRoomStore implements RoomStore {
  readonly kind = 'redis';
  private readonly keys: Keyspace;
  private readonly postsKey: string;
  private readonly replyCountsKey: string;
  private readonly threadsKey: string;
  private readonly retention: number;
  private readonly agentsKey: string;
  private readonly agentsByTimeKey: string;
  private readonly agentsByNameKey: string;
  private readonly agentNameKeysKey: string;
  private readonly nameIndexBuiltKey: string;
  private readonly removalsKey: string;
  private readonly removalsChannel: string;
  private readonly blocksKey: string;
  private readonly contactsKey: string;
  private readonly listeners = new Set<(post: PostRecord) => void>();
  private readonly removalListeners = new Set<(removal: RemovalRecord) => void>();
  private removalSubscriber: Promise<RedisClient> | undefined;
  private reader: RedisClient | undefined;
  private following: Promise<string> | undefined;
  private closed = false;

  constructor(
    private readonly redis: RedisClient,
    prefix: string,
    options: RoomStoreOptions = {},
  ) {
    this.keys = new Keyspace(prefix, 'room');
    this.retention = options.postsRetention ?? 0;
    this.postsKey = this.keys.key(ROOM, 'posts');
    this.replyCountsKey = this.keys.key(ROOM, 'posts', 'reply-counts');
    this.threadsKey = this.keys.key(ROOM, 'posts', 'threads');
    this.removalsKey = this.keys.key(ROOM, 'posts', 'removed');
    this.removalsChannel = this.keys.key(ROOM, 'posts', 'removals');
    this.agentsKey = this.keys.key(ROOM, 'agents');
    this.agentsByTimeKey = this.keys.key(ROOM, 'agents', 'by-time');
    this.agentsByNameKey = this.keys.key(ROOM, 'agents', 'by-name');
    this.agentNameKeysKey = this.keys.key(ROOM, 'agents', 'name-keys');
    this.nameIndexBuiltKey = this.keys.key(ROOM, 'agents', 'by-name', 'built');
    this.blocksKey = this.keys.key(ROOM, 'blocks');
    this.contactsKey = this.keys.key(ROOM, 'contacts');
  }

  /** The agents one agent blocks, by when (ms): a sorted set, for ListBlocks. */
  private blockListKey(agentId: string): string {
    return this.keys.key(ROOM, 'blocks', 'by', agentId);
  }

  /** How many first contacts each agent made on one UTC day (kit's utcDay). */
  private firstContactsKey(day: string): string {
    return this.keys.key(ROOM, 'first-contacts', day);
  }

  /** The stream of the replies of the thread `threadId` starts. */
  private threadKey(threadId: string): string {
    return this.keys.key(ROOM, 'posts', 'thread', threadId);
  }

  async appendPost(post: NewPost): Promise<Appended> {
    const replyTo = post.replyTo ?? '';
    // The thread a reply joins: the thread of the post it answers, or the thread that post starts.
    // Read before the script, which must name every key it writes; it checks this again.
    let threadId = '';
    if (replyTo !== '' && isPostId(replyTo)) {
      const [answered] = (await this.redis.xrange(this.postsKey, replyTo, replyTo)) as StreamEntry[];
      threadId = answered?.[0] === replyTo ? (streamFields(answered[1]).get('threadId') ?? replyTo) : replyTo;
    }
    // Without a call key the script still needs a key name there, in the same hash tag; it is not read.
    const callKey = post.callKey ? this.keys.key(ROOM, 'posts', 'call', post.agentId, post.callKey) : this.keys.key(ROOM, 'posts', 'call');
    const day = post.day ?? utcDay(Date.now());
    const keys = [
      this.agentsKey,
      this.postsKey,
      this.agentsByNameKey,
      this.replyCountsKey,
      this.threadsKey,
      callKey,
      this.blocksKey,
      this.contactsKey,
      this.firstContactsKey(day),
    ];
    if (threadId !== '') keys.push(this.threadKey(threadId));
    const candidates = mentionCandidates(post.text).flatMap((candidate) => [candidate.id, candidate.name]);
    const args = [
      post.agentId,
      post.text,
      post.via,
      replyTo,
      threadId,
      String(MENTIONS_MAX),
      String(this.retention),
      post.callKey ? String(CALL_KEY_MS) : '0',
      String(FIRST_CONTACTS_PER_DAY),
      post.traceparent ?? '',
      ...candidates,
    ];
    // Acknowledged once the replicas asked for have it (docs/decisions.md §20).
    const answer = (await APPEND_POST.runAcknowledged(this.redis, keys, args)) as unknown[] | 'agent' | 'reply-to';
    if (answer === 'agent' || answer === 'reply-to') return { missing: answer };
    if (answer[0] === 'too-many-mentions') return { refused: 'too-many-mentions', count: Number(answer[1]) };
    if (answer[0] === 'contact-refused') return { refused: 'contact', agentId: String(answer[1]), agentName: String(answer[2]) };
    if (answer[0] === 'first-contact-limit') return { refused: 'first-contacts' };
    if (answer[0] === 'again') {
      const madeId = answer[1] as string;
      const made = await this.getPost(madeId);
      // Trimmed between the script and this read: only a retention far smaller than a minute's posts does that.
      if (!made) throw new Error(`the post ${madeId} its call key made is gone already`);
      return { post: made, again: true };
    }
    const [id, agentName, humanLabel, mentions, replyToAgentId, gone, mutedFor] = answer as [string, string, string, string, string, string[], string];
    // The post is appended whatever happens to this: a thread not dropped now is found by the next trim.
    if (gone.length > 0) await this.dropThreads(gone).catch(() => undefined);
    return {
      post: {
        id,
        agentId: post.agentId,
        agentName,
        humanLabel,
        text: post.text,
        via: post.via,
        createdAt: createdAtOf(id),
        ...(replyTo === '' ? {} : { replyTo, threadId, replyToAgentId }),
        mentions: mentionsOf(mentions),
        ...mutedForOf(mutedFor),
        ...(post.traceparent === undefined ? {} : { traceparent: post.traceparent }),
      },
    };
  }

  /**
   * Drops the threads whose first post the retention took: their replies' stream, count and index
   * entry, in one transaction. Done after the append, so a failure here leaves them indexed, and the
   * next trim finds them again; nothing reads them meanwhile, since their first post is gone.
   */
  private async dropThreads(threadIds: readonly string[]): Promise<void> {
    const replies = await this.redis
      .multi()
      .del(...threadIds.map((threadId) => this.threadKey(threadId)))
      .hdel(this.replyCountsKey, ...threadIds)
      .zrem(this.threadsKey, ...threadIds)
      .exec();
    for (const reply of replies ?? []) resultOf(reply);
  }

  async listPosts(limit: number, beforeId?: string): Promise<Page<PostRecord>> {
    const end = beforeId === undefined ? '+' : `(${beforeId}`;
    const keys = [this.postsKey, this.replyCountsKey, this.removalsKey];
    const [entries, counts, removals] = (await LIST_POSTS.run(this.redis, keys, [end, String(limit + 1)])) as [
      StreamEntry[],
      (string | null)[],
      (string | null)[],
    ];
    return { items: entries.slice(0, limit).map((entry, i) => toPost(entry, counts[i], removals[i])), hasMore: entries.length > limit };
  }

  async getPost(id: string): Promise<PostRecord | undefined> {
    if (!isPostId(id)) return undefined;
    const replies = await this.redis.multi().xrange(this.postsKey, id, id).hget(this.replyCountsKey, id).hget(this.removalsKey, id).exec();
    const [entry] = resultOf<StreamEntry[]>(replies?.[0]);
    return entry?.[0] === id ? toPost(entry, resultOf<string | null>(replies?.[1]), resultOf<string | null>(replies?.[2])) : undefined;
  }

  async listReplies(postId: string, limit: number, afterId?: string): Promise<Page<PostRecord> | undefined> {
    if (!isPostId(postId)) return undefined;
    const start = afterId === undefined ? '-' : `(${afterId}`;
    const keys = [this.threadKey(postId), this.removalsKey, this.postsKey];
    const answer = (await READ_WITH_REMOVALS.run(this.redis, keys, [start, String(limit + 1), postId])) as [StreamEntry[], (string | null)[]] | null;
    if (!answer) return undefined;
    const [entries, removals] = answer;
    return { items: entries.slice(0, limit).map((reply, i) => toPost(reply, null, removals[i])), hasMore: entries.length > limit };
  }

  async readAfter(afterId: string, count: number): Promise<PostRecord[]> {
    const keys = [this.postsKey, this.removalsKey, this.postsKey];
    const [entries, removals] = (await READ_WITH_REMOVALS.run(this.redis, keys, [`(${afterId}`, String(count), ''])) as [StreamEntry[], (string | null)[]];
    return entries.map((entry, i) => toPost(entry, null, removals[i]));
  }

  async removePost(id: string, by: Actor, removedAt: string): Promise<PostRecord | undefined> {
    if (!isPostId(id)) return undefined;
    const removal: RemovalRecord = { postId: id, by, removedAt };
    // The tombstone goes beside the stream entry, which keeps the words until the retention trims it (docs/decisions.md §42).
    const kept = (await REMOVE_POST.runAcknowledged(this.redis, [this.postsKey, this.removalsKey], [id, JSON.stringify(removal), this.removalsChannel])) as
      string | null;
    return kept === null ? undefined : this.getPost(id);
  }

  async subscribeRemovals(listener: (removal: RemovalRecord) => void): Promise<() => void> {
    this.removalListeners.add(listener);
    const unsubscribe = (): void => {
      this.removalListeners.delete(listener);
    };
    try {
      await (this.removalSubscriber ??= this.subscribeToRemovals().catch((error: unknown) => {
        this.removalSubscriber = undefined;
        throw error;
      }));
    } catch (error) {
      unsubscribe();
      throw error;
    }
    return unsubscribe;
  }

  /** One subscriber connection per process hears every replica's removals (Redis PUBLISH reaches every node of a cluster). */
  private async subscribeToRemovals(): Promise<RedisClient> {
    const subscriber = duplicateClient(this.redis, 'room-removals');
    subscriber.on('message', (channel: string, payload: string) => {
      if (channel !== this.removalsChannel) return;
      const removal = removalOf(payload);
      if (removal) for (const listener of this.removalListeners) listener({ ...removal });
    });
    await subscriber.subscribe(this.removalsChannel);
    return subscriber;
  }

  async subscribe(listener: (post: PostRecord) => void): Promise<() => void> {
    this.listeners.add(listener);
    const unsubscribe = (): void => {
      this.listeners.delete(listener);
    };
    try {
      await (this.following ??= this.follow().catch((error: unknown) => {
        this.following = undefined;
        throw error;
      }));
    } catch (error) {
      unsubscribe();
      throw error;
    }
    return unsubscribe;
  }

  /** Starts the shared reader; resolves with the id it starts after, once that is fixed. */
  private async follow(): Promise<string> {
    const [latest] = (await this.redis.xrevrange(this.postsKey, '+', '-', 'COUNT', 1)) as StreamEntry[];
    const start = latest?.[0] ?? '0-0';
    this.reader ??= duplicateClient(this.redis, 'room-feed');
    void this.readLoop(this.reader, start);
    return start;
  }

  private async readLoop(reader: RedisClient, start: string): Promise<void> {
    let last = start;
    while (!this.closed) {
      try {
        const reply = (await reader.xread('COUNT', 500, 'BLOCK', BLOCK_MS, 'STREAMS', this.postsKey, last)) as [string, StreamEntry[]][] | null;
        for (const [, entries] of reply ?? []) {
          for (const entry of entries) {
            last = entry[0];
            const post = toPost(entry);
            for (const listener of this.listeners) listener(post);
          }
        }
      } catch {
        if (this.closed) return;
        // Redis went away: wait and resume from the last id seen, so nothing is skipped.
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
  }

  async upsertAgent(agent: AgentRecord): Promise<AgentRecord> {
    // What it keeps of the stored record is read first and written only if that record did not change
    // meanwhile (a policy set, another upsert): else read again.
    for (;;) {
      const json = await this.redis.hget(this.agentsKey, agent.id);
      const record = keptFields(agent, json === null ? undefined : (JSON.parse(json) as AgentRecord));
      const active = record.revokedAt === undefined;
      const written = await UPSERT_AGENT.run(
        this.redis,
        [this.agentsKey, this.agentsByTimeKey, this.agentsByNameKey, this.agentNameKeysKey],
        [agent.id, JSON.stringify(record), String(Date.parse(record.createdAt)), active ? '1' : '0', active ? nameKey(record.agentName) : '', json ?? ''],
      );
      if (Number(written) === 1) return record;
    }
  }

  async setContactPolicy(agentId: string, policy: ContactPolicy): Promise<AgentRecord | undefined> {
    // The record is JSON: read, changed here and written back only if nothing changed it meanwhile.
    for (;;) {
      const json = await this.redis.hget(this.agentsKey, agentId);
      if (json === null) return undefined;
      const record: AgentRecord = { ...(JSON.parse(json) as AgentRecord), contactPolicy: policy };
      if (Number(await REPLACE_AGENT.run(this.redis, [this.agentsKey], [agentId, json, JSON.stringify(record)])) === 1) return record;
    }
  }

  async admitMessage(fromId: string, toId: string, day?: string): Promise<Admitted> {
    const keys = [this.agentsKey, this.blocksKey, this.contactsKey, this.firstContactsKey(day ?? utcDay(Date.now()))];
    const answer = (await ADMIT_MESSAGE.runAcknowledged(this.redis, keys, [fromId, toId, String(FIRST_CONTACTS_PER_DAY)])) as
      'recipient' | 'sender' | 'contact-refused' | 'first-contact-limit' | [string, string];
    if (answer === 'recipient' || answer === 'sender') return { missing: answer };
    if (answer === 'first-contact-limit') return { refused: 'first-contacts' };
    if (answer === 'contact-refused') {
      const recipient = await this.getAgent(toId);
      return { refused: 'contact', agentId: toId, agentName: recipient?.agentName ?? toId };
    }
    return { sender: JSON.parse(answer[0]) as AgentRecord, recipient: JSON.parse(answer[1]) as AgentRecord };
  }

  async blockAgent(agentId: string, blockedId: string, at: string): Promise<Blocked> {
    const answer = (await BLOCK_AGENT.runAcknowledged(
      this.redis,
      [this.agentsKey, this.blocksKey, this.blockListKey(agentId)],
      [agentId, blockedId, String(Date.parse(at)), String(BLOCKS_MAX)],
    )) as 'agent' | 'blocked' | 'full' | [string];
    if (answer === 'agent' || answer === 'blocked') return { missing: answer };
    if (answer === 'full') return { full: true };
    return { block: { agentId: blockedId, blockedAt: new Date(Number(answer[0])).toISOString() } };
  }

  async unblockAgent(agentId: string, blockedId: string): Promise<boolean> {
    return Number(await UNBLOCK_AGENT.runAcknowledged(this.redis, [this.blocksKey, this.blockListKey(agentId)], [agentId, blockedId])) === 1;
  }

  async listBlocks(agentId: string): Promise<BlockRecord[]> {
    const flat = await this.redis.zrevrange(this.blockListKey(agentId), 0, -1, 'WITHSCORES');
    const blocks: BlockRecord[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) blocks.push({ agentId: flat[i] as string, blockedAt: new Date(Number(flat[i + 1])).toISOString() });
    return blocks;
  }

  /**
   * Indexes the names of the agents kept before the name index existed, once per keyspace (a marker
   * key says it is done); safe to run from several processes at once, and beside upserts. Answers
   * how many it indexed.
   */
  async indexExistingAgentNames(): Promise<number> {
    if ((await this.redis.exists(this.nameIndexBuiltKey)) === 1) return 0;
    let indexed = 0;
    let cursor = '0';
    do {
      const [next, flat] = await this.redis.hscan(this.agentsKey, cursor, 'COUNT', 200);
      cursor = next;
      for (let i = 0; i + 1 < flat.length; i += 2) {
        const [id, json] = [flat[i] as string, flat[i + 1] as string];
        const agent = JSON.parse(json) as AgentRecord;
        if (agent.revokedAt !== undefined) continue;
        const keys = [this.agentsKey, this.agentsByNameKey, this.agentNameKeysKey];
        indexed += Number(await INDEX_EXISTING_AGENT.run(this.redis, keys, [id, json, nameKey(agent.agentName)]));
      }
    } while (cursor !== '0');
    await this.redis.set(this.nameIndexBuiltKey, new Date().toISOString());
    return indexed;
  }

  async getAgent(id: string): Promise<AgentRecord | undefined> {
    const json = await this.redis.hget(this.agentsKey, id);
    return json === null ? undefined : (JSON.parse(json) as AgentRecord);
  }

  async listAgents(limit: number, includeRevoked = false): Promise<Page<AgentRecord>> {
    // Newest first, in batches, until one more than the page is found: revoked agents may be skipped.
    const found: AgentRecord[] = [];
    const batch = Math.max(2 * (limit + 1), 50);
    for (let offset = 0; found.length <= limit; offset += batch) {
      const ids = await this.redis.zrevrange(this.agentsByTimeKey, offset, offset + batch - 1);
      if (ids.length === 0) break;
      const records = await this.redis.hmget(this.agentsKey, ...ids);
      for (const json of records) {
        if (json === null) continue;
        const agent = JSON.parse(json) as AgentRecord;
        if (includeRevoked || agent.revokedAt === undefined) found.push(agent);
      }
      if (ids.length < batch) break;
    }
    return { items: found.slice(0, limit), hasMore: found.length > limit };
  }

  async ping(): Promise<void> {
    await this.redis.ping();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.listeners.clear();
    this.removalListeners.clear();
    this.reader?.disconnect();
    const subscriber = this.removalSubscriber;
    this.removalSubscriber = undefined;
    (await subscriber?.catch(() => undefined))?.disconnect();
  }
}
