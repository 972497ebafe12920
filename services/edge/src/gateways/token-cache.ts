import { createHash } from 'node:crypto';
import { ACTORS, type Actor, type Scope } from '@agentroom/kit/domain';
import type { ServiceClient } from '@agentroom/kit/grpc';
import type { Logger } from '@agentroom/kit/log';
import { tokenCacheLive, tokenCacheLookups, tokenRevocationsReceived } from '@agentroom/kit/metrics';
import type { AuthenticateTokenResponse__Output, AuthServiceClient, WatchRevocationsResponse__Output } from '@agentroom/proto';
import { type UpstreamWatch, upstreamWatch } from './upstream.js';

const RECONNECT_MIN_MS = 250;
const RECONNECT_MAX_MS = 5_000;
/** How many answers one edge process keeps at most; the oldest goes first. */
export const TOKEN_CACHE_CAPACITY = 10_000;
/**
 * Auth sends something on the revocation stream at least every second; this long without a word,
 * the stream is taken for broken (a silent network fault, a stalled replica) and the cache is
 * emptied and bypassed until a new stream is positioned (docs/decisions.md §14).
 */
export const REVOCATION_SILENCE_MS = 3_000;

/** Who a valid bearer token speaks for. */
export interface Principal {
  tokenId: string;
  agentId: string;
  agentName: string;
  humanLabel: string;
  scopes: Scope[];
  expiresAt: string;
  /** The resource the token is bound to (RFC 8707): it works only at that URL and below; '' everywhere. */
  resource: string;
  /**
   * Set while the agent is suspended (docs/decisions.md §40, §43): its writes are refused
   * (agent-suspended), its reads served. Cached with the answer, so it holds on this edge within the
   * cache's TTL of being made or lifted.
   */
  suspension?: Suspension;
}

/** Why an agent's writes are refused: by whom, why, and until when (RFC 3339; absent: until lifted). */
export interface Suspension {
  by: Actor;
  reason: string;
  since: string;
  until?: string;
}

function principalOf(response: AuthenticateTokenResponse__Output): Principal {
  const { tokenId, agentId, agentName, humanLabel, scopes, expiresAt, resource, suspension } = response;
  const principal: Principal = { tokenId, agentId, agentName, humanLabel, scopes: scopes as Scope[], expiresAt, resource };
  if (suspension !== null && (ACTORS as readonly string[]).includes(suspension.by)) {
    principal.suspension = {
      by: suspension.by as Actor,
      reason: suspension.reason,
      since: suspension.since,
      ...(suspension.until === '' ? {} : { until: suspension.until }),
    };
  }
  return principal;
}

/** What the revocation stream says: a token was revoked, or (a heartbeat) the stream is still followed. */
type RevocationSignal = { kind: 'revoked'; tokenId: string; agentId: string } | { kind: 'alive' };

function signalOf(response: WatchRevocationsResponse__Output): RevocationSignal {
  const revocation = response.revocation;
  // A revocation that names no token can drop nothing; it still says the stream is alive.
  if (revocation === null || revocation.tokenId === '') return { kind: 'alive' };
  return { kind: 'revoked', tokenId: revocation.tokenId, agentId: revocation.agentId };
}

export interface TokenCacheOptions {
  /** How long an answer is kept (TOKEN_CACHE_MS); 0 turns the cache off and nothing is watched. */
  ttlMs: number;
  log: Logger;
  capacity?: number;
  silenceMs?: number;
}

interface Entry {
  principal: Principal;
  tokenId: string;
  /** Epoch ms after which the entry is not used: its TTL or the token's expiry, whichever is first. */
  until: number;
}

/** Tokens are cache keys only as their SHA-256: a heap dump of edge holds no bearer token. */
function keyOf(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('base64url');
}

/**
 * Auth's answers to "who is this bearer token", kept for about a second in this edge process, so a
 * busy agent costs auth one AuthenticateToken a second instead of one per request. Only positive
 * answers are kept, never past the token's expiry.
 *
 * A revoked token must stop working everywhere at once, not a TTL later: auth's WatchRevocations
 * stream tells every edge of every revocation, whichever auth replica made it, and the entry is
 * dropped. The cache is used only while that stream is live (positioned, and heard from within
 * REVOCATION_SILENCE_MS); before it is positioned, while it is broken, or while auth restarts, the
 * cache is empty and every request asks auth. So how long a revoked token keeps working on an edge
 * is the stream's latency (docs/decisions.md §14, measured by e2e/cluster/replicas.test.ts).
 */
export class TokenCache {
  private readonly entries = new Map<string, Entry>();
  /** Token id to cache key, so a revocation (which names the token id) finds its entry. */
  private readonly keysById = new Map<string, string>();
  private readonly capacity: number;
  private readonly silenceMs: number;
  private watch: UpstreamWatch<RevocationSignal> | undefined;
  private live = false;
  /**
   * Moves on with every revocation and every change of the stream's state. An answer that was
   * asked for before a move is not kept: the revocation may have been of that very token, and
   * auth may have answered from before it.
   */
  private epoch = 0;
  private closed = false;
  private retryMs = RECONNECT_MIN_MS;
  private retryTimer: NodeJS.Timeout | undefined;
  private silenceTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly auth: ServiceClient<AuthServiceClient>,
    private readonly options: TokenCacheOptions,
  ) {
    this.capacity = options.capacity ?? TOKEN_CACHE_CAPACITY;
    this.silenceMs = options.silenceMs ?? REVOCATION_SILENCE_MS;
  }

  /** Starts following revocations (with TOKEN_CACHE_MS 0, does nothing: every token is asked of auth). */
  start(): void {
    if (this.options.ttlMs > 0) this.connect();
  }

  /** True while answers are being cached: the revocation stream is positioned and heard from. */
  get isLive(): boolean {
    return this.live;
  }

  get size(): number {
    return this.entries.size;
  }

  /** Who the token speaks for: from the cache while it is live, else from auth (token-invalid, token-expired and outages as auth throws them). */
  async authenticate(token: string): Promise<Principal> {
    if (!this.live) {
      tokenCacheLookups.inc({ outcome: 'bypass' });
      return this.ask(token);
    }
    const key = keyOf(token);
    const asked = Date.now();
    const entry = this.entries.get(key);
    if (entry !== undefined) {
      if (entry.until > asked) {
        tokenCacheLookups.inc({ outcome: 'hit' });
        return entry.principal;
      }
      this.forget(key, entry);
    }
    tokenCacheLookups.inc({ outcome: 'miss' });
    const epoch = this.epoch;
    const principal = await this.ask(token);
    return this.live && epoch === this.epoch ? this.remember(key, principal, asked) : principal;
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.retryTimer);
    clearTimeout(this.silenceTimer);
    this.watch?.cancel();
    this.watch = undefined;
    this.goDark();
  }

  /** Keeps the answer; answers what is kept (frozen: every request that hits it shares it). */
  private remember(key: string, principal: Principal, asked: number): Principal {
    // From when it was asked, not answered: the entry never outlives what auth vouched for.
    const until = Math.min(asked + this.options.ttlMs, Date.parse(principal.expiresAt));
    if (!(until > asked)) return principal;
    const previous = this.entries.get(key);
    if (previous !== undefined) this.forget(key, previous);
    while (this.entries.size >= this.capacity) {
      const oldest = this.entries.entries().next().value;
      if (oldest === undefined) break;
      this.forget(oldest[0], oldest[1]);
    }
    const frozen = Object.freeze({ ...principal, scopes: Object.freeze([...principal.scopes]) }) as Principal;
    this.entries.set(key, { principal: frozen, tokenId: principal.tokenId, until });
    this.keysById.set(principal.tokenId, key);
    return frozen;
  }

  private forget(key: string, entry: Entry): void {
    this.entries.delete(key);
    if (this.keysById.get(entry.tokenId) === key) this.keysById.delete(entry.tokenId);
  }

  /**
   * A token revoked through this edge, once auth has answered: forgotten here before the revocation
   * is answered, so the agent that revoked it is refused at its very next call here, without waiting
   * for the stream; other edges hear it on the stream.
   */
  forgetToken(token: string): void {
    this.epoch += 1;
    const key = keyOf(token);
    const entry = this.entries.get(key);
    if (entry !== undefined) this.forget(key, entry);
  }

  private async ask(token: string): Promise<Principal> {
    return principalOf(await this.auth.call('authenticateToken', { token }));
  }

  private revoked(tokenId: string): void {
    this.epoch += 1;
    tokenRevocationsReceived.inc();
    const key = this.keysById.get(tokenId);
    const entry = key === undefined ? undefined : this.entries.get(key);
    if (key !== undefined && entry !== undefined) this.forget(key, entry);
  }

  /** Not live: nothing kept, nothing used, until a stream is positioned again. */
  private goDark(): void {
    this.live = false;
    this.epoch += 1;
    this.entries.clear();
    this.keysById.clear();
    tokenCacheLive.set(0);
  }

  private connect(): void {
    if (this.closed) return;
    // Every token revoked from now on, by any auth replica, and a heartbeat at least every second.
    const watch = upstreamWatch(this.auth.watch('watchRevocations', {}), signalOf);
    this.watch = watch;
    // A stream that is not positioned within the silence limit is given up on, too.
    this.heard(watch);
    watch.onItem((signal) => {
      if (this.watch !== watch) return;
      this.heard(watch);
      if (signal.kind === 'revoked') this.revoked(signal.tokenId);
    });
    watch.onEnd((error) => this.dropped(watch, error));
    watch.positioned.then(
      () => {
        if (this.watch !== watch || this.closed) return;
        this.epoch += 1;
        this.live = true;
        this.retryMs = RECONNECT_MIN_MS;
        this.heard(watch);
        tokenCacheLive.set(1);
        this.options.log.info('token cache is live: the revocation stream is positioned');
      },
      (error: unknown) => this.dropped(watch, error instanceof Error ? error : new Error(String(error))),
    );
  }

  /** Something came on the stream: it is alive for another REVOCATION_SILENCE_MS. */
  private heard(watch: UpstreamWatch<RevocationSignal>): void {
    if (this.silenceTimer !== undefined) {
      this.silenceTimer.refresh();
      return;
    }
    this.silenceTimer = setTimeout(() => {
      this.silenceTimer = undefined;
      this.dropped(this.watch ?? watch, new Error(`nothing heard on the revocation stream for ${this.silenceMs} ms`));
    }, this.silenceMs);
    this.silenceTimer.unref();
  }

  /** The stream ended, failed or went silent: empty and bypass the cache, and watch again with backoff. */
  private dropped(watch: UpstreamWatch<RevocationSignal>, error: Error): void {
    if (this.watch !== watch || this.closed) return;
    this.watch = undefined;
    watch.cancel();
    clearTimeout(this.silenceTimer);
    this.silenceTimer = undefined;
    const wasLive = this.live;
    this.goDark();
    this.options.log.warn(
      { err: error, retryInMs: this.retryMs, wasLive },
      'token cache bypassed: the revocation stream is not live; every token is asked of auth until it is back',
    );
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => this.connect(), this.retryMs);
    this.retryTimer.unref();
    this.retryMs = Math.min(this.retryMs * 2, RECONNECT_MAX_MS);
  }
}
