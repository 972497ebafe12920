import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Logger } from '@agentroom/kit/log';
import { mcpChangeWatches } from '@agentroom/kit/metrics';
import { duplicateClient, Keyspace, LuaScript, type RedisClient } from '@agentroom/kit/store';
import { type McpServer, ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';
import type { Request, Response } from 'express';
import { type McpChanges, type Release, subscribedUri } from './changes.js';
import type { McpRegistration } from './registration.js';

/**
 * The 2025-11-25 session of a host that subscribes (docs/decisions.md §47): `Mcp-Session-Id` is a
 * random name minted at `initialize` and stored nowhere; what a session holds (its subscriptions,
 * the agent that owns it, whether DELETE ended it) lives in the shared store, written only by
 * `resources/subscribe`, `resources/unsubscribe` and DELETE. Its GET stream is served from the live
 * hub by whichever edge replica the stream reaches; a change to a session is published to every
 * replica, and the one holding its stream reads the session again.
 */

/** What the store holds of one session. */
export interface SessionRecord {
  /** The agent whose token first subscribed (`''`: subscribed without a token); later subscribers and streams must be the same. */
  owner?: string;
  ended: boolean;
  uris: string[];
}

export type SubscribeOutcome = 'ok' | 'ended' | 'not-the-owner';

/** Where sessions are kept: Redis for a deployment of several replicas, memory for `npm start`. */
export interface SessionStore {
  read(id: string): Promise<SessionRecord>;
  subscribe(id: string, uri: string, owner: string): Promise<SubscribeOutcome>;
  unsubscribe(id: string, uri: string, owner: string): Promise<SubscribeOutcome>;
  end(id: string): Promise<void>;
  /** Hears the id of every session changed, through any replica. */
  onChange(listener: (id: string) => void): Promise<() => void>;
  close(): Promise<void>;
}

/** How many ended sessions a process remembers without asking the store. */
const ENDED_IDS_KEPT = 10_000;

/** A session's record outlives its last write by this long (a host that never says DELETE). */
export const SESSION_TTL_SECONDS = 24 * 60 * 60;

const SESSION_ID = /^[A-Za-z0-9_-]{22}$/;

/** A new session's name: 128 random bits. */
export function newSessionId(): string {
  return randomBytes(16).toString('base64url');
}

/** Whether a header value could be a session this edge minted. */
export function isSessionId(value: string | undefined): value is string {
  return value !== undefined && SESSION_ID.test(value);
}

const URI_FIELD = 'u:';

function recordOf(fields: Record<string, string>): SessionRecord {
  const uris: string[] = [];
  for (const name of Object.keys(fields)) if (name.startsWith(URI_FIELD)) uris.push(name.slice(URI_FIELD.length));
  return { ...(fields.owner === undefined ? {} : { owner: fields.owner }), ended: fields.ended === '1', uris };
}

/** Memory: one edge process (the embedded `npm start`). */
export class MemorySessionStore implements SessionStore {
  private readonly sessions = new Map<string, { fields: Map<string, string>; expiresAt: number }>();
  private readonly changes = new EventEmitter();

  constructor() {
    this.changes.setMaxListeners(0);
  }

  read(id: string): Promise<SessionRecord> {
    const session = this.live(id);
    return Promise.resolve(recordOf(Object.fromEntries(session?.fields ?? [])));
  }

  subscribe(id: string, uri: string, owner: string): Promise<SubscribeOutcome> {
    return Promise.resolve(this.write(id, owner, (fields) => fields.set(`${URI_FIELD}${uri}`, '1')));
  }

  unsubscribe(id: string, uri: string, owner: string): Promise<SubscribeOutcome> {
    return Promise.resolve(this.write(id, owner, (fields) => fields.delete(`${URI_FIELD}${uri}`)));
  }

  end(id: string): Promise<void> {
    this.sessions.set(id, { fields: new Map([['ended', '1']]), expiresAt: Date.now() + SESSION_TTL_SECONDS * 1_000 });
    this.changes.emit('change', id);
    return Promise.resolve();
  }

  onChange(listener: (id: string) => void): Promise<() => void> {
    this.changes.on('change', listener);
    return Promise.resolve(() => this.changes.off('change', listener));
  }

  close(): Promise<void> {
    this.changes.removeAllListeners();
    return Promise.resolve();
  }

  private live(id: string): { fields: Map<string, string>; expiresAt: number } | undefined {
    const session = this.sessions.get(id);
    if (session !== undefined && session.expiresAt < Date.now()) {
      this.sessions.delete(id);
      return undefined;
    }
    return session;
  }

  private write(id: string, owner: string, change: (fields: Map<string, string>) => void): SubscribeOutcome {
    const now = Date.now();
    // Expired sessions go as new ones are written: memory stays bounded by the sessions of a day.
    for (const [key, session] of this.sessions) if (session.expiresAt < now) this.sessions.delete(key);
    const session = this.live(id) ?? { fields: new Map<string, string>(), expiresAt: 0 };
    if (session.fields.get('ended') === '1') return 'ended';
    const held = session.fields.get('owner');
    if (held !== undefined && held !== owner) return 'not-the-owner';
    session.fields.set('owner', owner);
    change(session.fields);
    session.expiresAt = now + SESSION_TTL_SECONDS * 1_000;
    this.sessions.set(id, session);
    this.changes.emit('change', id);
    return 'ok';
  }
}

/** KEYS[1] the session's hash; ARGV: owner, field, '1' to add or '0' to remove, ttl, channel, id. */
const WRITE = new LuaScript(`
if redis.call('HGET', KEYS[1], 'ended') == '1' then return 'ended' end
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner and owner ~= ARGV[1] then return 'not-the-owner' end
redis.call('HSET', KEYS[1], 'owner', ARGV[1])
if ARGV[3] == '1' then redis.call('HSET', KEYS[1], ARGV[2], '1') else redis.call('HDEL', KEYS[1], ARGV[2]) end
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('PUBLISH', ARGV[5], ARGV[6])
return 'ok'
`);

/** KEYS[1] the session's hash; ARGV: ttl, channel, id. */
const END = new LuaScript(`
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'ended', '1')
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
`);

/** Redis: every replica reads and writes the same sessions, and hears each change by PUBLISH (which reaches every node of a cluster). */
export class RedisSessionStore implements SessionStore {
  private readonly keys: Keyspace;
  private readonly channel: string;
  private readonly listeners = new Set<(id: string) => void>();
  private subscriber: Promise<RedisClient> | undefined;

  constructor(
    private readonly redis: RedisClient,
    prefix: string,
  ) {
    this.keys = new Keyspace(prefix, 'edge');
    this.channel = this.keys.key('mcp-sessions', 'changed');
  }

  async read(id: string): Promise<SessionRecord> {
    return recordOf(await this.redis.hgetall(this.key(id)));
  }

  async subscribe(id: string, uri: string, owner: string): Promise<SubscribeOutcome> {
    return this.write(id, owner, uri, true);
  }

  async unsubscribe(id: string, uri: string, owner: string): Promise<SubscribeOutcome> {
    return this.write(id, owner, uri, false);
  }

  async end(id: string): Promise<void> {
    await END.run(this.redis, [this.key(id)], [String(SESSION_TTL_SECONDS), this.channel, id]);
  }

  async onChange(listener: (id: string) => void): Promise<() => void> {
    this.listeners.add(listener);
    const unsubscribe = (): void => {
      this.listeners.delete(listener);
    };
    try {
      await (this.subscriber ??= this.follow().catch((error: unknown) => {
        this.subscriber = undefined;
        throw error;
      }));
    } catch (error) {
      unsubscribe();
      throw error;
    }
    return unsubscribe;
  }

  async close(): Promise<void> {
    this.listeners.clear();
    const subscriber = await this.subscriber?.catch(() => undefined);
    subscriber?.disconnect();
  }

  private key(id: string): string {
    return this.keys.key(`mcp-session:${id}`);
  }

  private async write(id: string, owner: string, uri: string, add: boolean): Promise<SubscribeOutcome> {
    const outcome = await WRITE.run(this.redis, [this.key(id)], [owner, `${URI_FIELD}${uri}`, add ? '1' : '0', String(SESSION_TTL_SECONDS), this.channel, id]);
    return outcome === 'ended' || outcome === 'not-the-owner' ? outcome : 'ok';
  }

  private async follow(): Promise<RedisClient> {
    const subscriber = duplicateClient(this.redis, 'edge-mcp-sessions');
    subscriber.on('message', (channel: string, id: string) => {
      if (channel !== this.channel) return;
      for (const listener of this.listeners) listener(id);
    });
    await subscriber.subscribe(this.channel);
    return subscriber;
  }
}

const HEARTBEAT_MS = 15_000;

/** One GET stream of a session, on this replica. */
interface SessionStream {
  id: string;
  /** The agent of the token the stream was opened with (`''`: none). */
  caller: string;
  res: Response;
  uris: Set<string>;
  release: Release | undefined;
  stopListening: () => void;
  /** Reads of the session run one after another, the last one wins. */
  reading: Promise<void>;
  over: boolean;
}

function updatedFrame(uri: string): string {
  return `event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri } })}\n\n`;
}

/** Why a session's request is refused: its HTTP status and the JSON-RPC error's message. */
export class SessionRefusal extends Error {
  constructor(
    readonly status: 400 | 403 | 404,
    message: string,
  ) {
    super(message);
  }
}

/** The sessions of this edge process: the GET streams it serves, and subscribe, unsubscribe and end for any session. */
export class LegacySessions {
  private readonly streams = new Map<string, Set<SessionStream>>();
  /** Sessions known to be ended, oldest first. */
  private readonly endedIds = new Set<string>();
  private readonly timer: NodeJS.Timeout;
  private following: Promise<() => void> | undefined;
  private closing = false;

  constructor(
    private readonly store: SessionStore,
    private readonly changes: McpChanges,
    private readonly log: Logger,
  ) {
    this.timer = setInterval(() => this.heartbeat(), HEARTBEAT_MS);
    this.timer.unref();
  }

  /** How many GET streams this process holds. */
  get open(): number {
    let count = 0;
    for (const streams of this.streams.values()) count += streams.size;
    return count;
  }

  /** `resources/subscribe`: the URI joins the session, for whichever replica serves its stream. */
  async subscribe(id: string, uri: string, caller: string): Promise<void> {
    this.refused(await this.store.subscribe(id, uri, caller), id);
    await this.readLocal(id);
  }

  async unsubscribe(id: string, uri: string, caller: string): Promise<void> {
    this.refused(await this.store.unsubscribe(id, uri, caller), id);
    await this.readLocal(id);
  }

  /**
   * Whether a session was ended (DELETE): a request bearing it is then answered 404, as 2025-11-25
   * requires. Ending is final, so an ended id is remembered here and the store is asked only of
   * sessions still open (one read of a request that names a session).
   */
  async ended(id: string): Promise<boolean> {
    if (this.endedIds.has(id)) return true;
    if (!(await this.store.read(id)).ended) return false;
    this.remember(id);
    return true;
  }

  private remember(id: string): void {
    this.endedIds.add(id);
    // Bounded: the oldest go first; one that goes is read from the store again.
    if (this.endedIds.size > ENDED_IDS_KEPT) this.endedIds.delete(this.endedIds.values().next().value as string);
  }

  /** DELETE: the session ends on every replica; its streams close. */
  async end(id: string): Promise<void> {
    await this.store.end(id);
    this.remember(id);
    await this.readLocal(id);
  }

  /**
   * GET: the session's stream, from now on: nothing is held for it but the response until the
   * session subscribes, so a host that never does costs an idle connection.
   */
  async stream(id: string, caller: string, req: Request, res: Response): Promise<void> {
    if (this.closing) throw new SessionRefusal(404, 'This edge process is shutting down; open the stream again.');
    this.following ??= this.store
      .onChange((changed) => void this.readLocal(changed))
      .catch((error: unknown) => {
        this.following = undefined;
        throw error;
      });
    await this.following;
    const record = await this.store.read(id);
    this.check(record, caller, id);
    const stream: SessionStream = {
      id,
      caller,
      res,
      uris: new Set(),
      release: undefined,
      stopListening: () => undefined,
      reading: Promise.resolve(),
      over: false,
    };
    stream.stopListening = this.changes.bus.subscribe((event) => {
      if (event.kind === 'resource_updated' && stream.uris.has(event.uri)) this.write(stream, updatedFrame(event.uri));
    });
    let local = this.streams.get(id);
    if (local === undefined) this.streams.set(id, (local = new Set()));
    local.add(stream);
    mcpChangeWatches.inc({ kind: 'session_streams' });
    res.on('close', () => this.forget(stream));
    req.socket.setNoDelay(true);
    req.socket.setKeepAlive(true, 60_000);
    res.status(200);
    res.setHeader('Content-Type', 'text/event-stream');
    res.setHeader('Cache-Control', 'no-store, no-transform');
    res.setHeader('X-Accel-Buffering', 'no');
    res.setHeader('Mcp-Session-Id', id);
    res.flushHeaders();
    try {
      await this.take(stream, record);
    } catch (error) {
      // The hub or a notification feed could not be opened: the host opens the stream again.
      this.log.warn({ err: error }, 'an MCP session stream could not follow its subscriptions; ending it for the host to reopen');
      this.finish(stream);
    }
  }

  /** Shutdown: every stream ends, for its host to open it again on another replica. */
  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.timer);
    for (const streams of [...this.streams.values()]) for (const stream of [...streams]) this.finish(stream);
    const stop = await this.following?.catch(() => undefined);
    stop?.();
  }

  private refused(outcome: 'ok' | 'ended' | 'not-the-owner', id: string): void {
    if (outcome === 'ended') throw new SessionRefusal(404, `Session ${id} was ended; initialize again.`);
    if (outcome === 'not-the-owner') throw new SessionRefusal(403, `Session ${id} subscribes for another agent's token; initialize a session of your own.`);
  }

  private check(record: SessionRecord, caller: string, id: string): void {
    if (record.ended) throw new SessionRefusal(404, `Session ${id} was ended; initialize again.`);
    if (record.owner !== undefined && record.owner !== caller) {
      throw new SessionRefusal(403, `Session ${id} belongs to another agent's token; open its stream with the token that subscribed.`);
    }
  }

  /** A session changed (here or on another replica): each of its streams here reads it again. */
  private async readLocal(id: string): Promise<void> {
    const local = this.streams.get(id);
    if (local === undefined) return;
    await Promise.all(
      [...local].map((stream) => {
        stream.reading = stream.reading.then(async () => {
          if (stream.over) return;
          try {
            await this.take(stream, await this.store.read(id));
          } catch (error) {
            this.log.warn({ err: error }, 'an MCP session stream could not read its session; ending it for the host to reopen');
            this.finish(stream);
          }
        });
        return stream.reading;
      }),
    );
  }

  /** Takes the session's subscriptions: keeps what tells of them, drops what no longer does. */
  private async take(stream: SessionStream, record: SessionRecord): Promise<void> {
    try {
      this.check(record, stream.caller, stream.id);
    } catch {
      this.finish(stream);
      return;
    }
    const wanted = new Set(record.uris);
    if (wanted.size === stream.uris.size && [...wanted].every((uri) => stream.uris.has(uri))) return;
    const release = wanted.size === 0 ? undefined : await this.changes.retain([...wanted]);
    if (stream.over) {
      release?.();
      return;
    }
    stream.release?.();
    stream.release = release;
    stream.uris = wanted;
  }

  private write(stream: SessionStream, frame: string): void {
    if (stream.over) return;
    stream.res.write(frame);
  }

  private heartbeat(): void {
    for (const streams of this.streams.values()) for (const stream of streams) this.write(stream, ': keepalive\n\n');
  }

  private finish(stream: SessionStream): void {
    if (!stream.over) stream.res.end();
    this.forget(stream);
  }

  private forget(stream: SessionStream): void {
    if (stream.over) return;
    stream.over = true;
    mcpChangeWatches.dec({ kind: 'session_streams' });
    stream.stopListening();
    stream.release?.();
    stream.release = undefined;
    const local = this.streams.get(stream.id);
    local?.delete(stream);
    if (local?.size === 0) this.streams.delete(stream.id);
  }
}

/** `resources/subscribe` and `resources/unsubscribe` of 2025-11-25, on the session the request names. */
export function registerSubscriptions(mcp: McpServer, registration: McpRegistration): void {
  const { sessions, call } = registration;
  const change = async (uri: string, subscribe: boolean): Promise<Record<string, never>> => {
    const parsed = subscribedUri(uri);
    if (parsed.kind === 'unknown') {
      throw new ProtocolError(
        ProtocolErrorCode.InvalidParams,
        `${uri} is not a resource whose changes this server tells: subscribe to agentroom://posts, a post, or your agent's notifications or messages.`,
      );
    }
    if (sessions === undefined || call.session === undefined) {
      throw new ProtocolError(
        ProtocolErrorCode.InvalidRequest,
        'A subscription lives in a session: send the Mcp-Session-Id that initialize answered, and open its GET stream.',
      );
    }
    const caller = call.admission.caller.principal?.agentId ?? '';
    // The route refused another agent's URI already, with the HTTP status a host acts on; this is the same rule.
    if (parsed.kind === 'agent' && parsed.agentId !== caller)
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, `${uri} is agent ${parsed.agentId}'s own.`);
    try {
      if (subscribe) await sessions.subscribe(call.session, uri, caller);
      else await sessions.unsubscribe(call.session, uri, caller);
    } catch (error) {
      if (error instanceof SessionRefusal) throw new ProtocolError(ProtocolErrorCode.InvalidRequest, error.message);
      throw error;
    }
    return {};
  };
  mcp.server.setRequestHandler('resources/subscribe', (request) => change(request.params.uri, true));
  mcp.server.setRequestHandler('resources/unsubscribe', (request) => change(request.params.uri, false));
}
