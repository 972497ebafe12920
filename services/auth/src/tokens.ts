import { randomBytes } from 'node:crypto';
import { hashSecret, isWellFormedToken, mintToken, type Scope, SCOPES, TOKEN_ROTATION_GRACE_SECONDS, TOKEN_ROTATIONS_PER_DAY } from '@agentroom/kit/domain';
import { createLogger, type Logger } from '@agentroom/kit/log';
import { DomainError } from '@agentroom/kit/problems';
import type { Clock } from '@agentroom/kit/store';
import type { SuspensionRecord, TokenRecord } from './records.js';
import type { RoomGateway } from './room.gateway.js';
import { type AuthStore, isLiveToken, type RevocationWatcher, type TokenList, type TokenPage, type TokenPosition } from './store.js';

const DAY_MS = 86_400_000;
/** An expired token is remembered this long, so it answers token-expired (not token-invalid) a while. */
export const EXPIRED_TOKEN_RETENTION_MS = 30 * DAY_MS;
/** The same for the short-lived tokens of an MCP host's connection. */
export const SHORT_TOKEN_RETENTION_MS = DAY_MS;

/** Who a token speaks for, once authenticated. */
export interface Principal {
  tokenId: string;
  agentId: string;
  agentName: string;
  humanLabel: string;
  scopes: Scope[];
  /** RFC 3339. */
  expiresAt: string;
  /** The resource the token is bound to (RFC 8707); empty when it works everywhere. */
  resource: string;
  /** Set while the agent is suspended: edge refuses its writes (docs/decisions.md §43). */
  suspension?: SuspensionRecord;
}

/** A rotated token: the new one, shown once, and when the old one stops working. */
export interface Rotated {
  token: string;
  record: TokenRecord;
  /** Epoch ms: the old token's expiry, cut to the grace. */
  previousExpiresAt: number;
  /** Rotations the agent has left this UTC day. */
  rotationsLeft: number;
}

/** Milliseconds from `now` to the next midnight UTC, when daily budgets start again. */
export function untilMidnightUtc(now: number): number {
  return DAY_MS - (now % DAY_MS);
}

/** What a new token is for; its scopes are frozen here. */
export interface TokenGrantInput {
  agentId: string;
  agentName: string;
  humanId: string;
  humanLabel: string;
  scopes: Scope[];
  /** Set when an operator provisions the agent instead of the human approving it: the reason they gave. */
  provisionReason?: string;
  /** Set for an MCP host's connection: its id, the token's shorter life, and the resource it is bound to. */
  connectionId?: string;
  ttlMs?: number;
  resource?: string;
}

export interface TokensOptions {
  store: AuthStore;
  /** Where the agent record's scopes are kept equal to the union of its live tokens'. */
  room: RoomGateway;
  /** TOKEN_TTL_DAYS. */
  ttlDays: number;
  /** TOKEN_ROTATION_GRACE_SECONDS: how long a rotated token keeps working; kit's constant by default. */
  rotationGraceSeconds?: number;
  clock: Clock;
  log?: Logger;
}

/** Bearer tokens: minted at approval, stored as hashes, authenticated on every call, revocable. */
export class Tokens {
  private readonly store: AuthStore;
  private readonly room: RoomGateway;
  private readonly ttlMs: number;
  private readonly graceMs: number;
  private readonly clock: Clock;
  private readonly log: Logger;

  constructor(options: TokensOptions) {
    this.store = options.store;
    this.room = options.room;
    this.ttlMs = options.ttlDays * DAY_MS;
    this.graceMs = (options.rotationGraceSeconds ?? TOKEN_ROTATION_GRACE_SECONDS) * 1000;
    this.clock = options.clock;
    this.log = options.log ?? createLogger('auth', 'silent');
  }

  /** A new token with frozen scopes; the plaintext is answered once and only its hash is stored. */
  async mint(input: TokenGrantInput): Promise<{ token: string; record: TokenRecord }> {
    const token = mintToken();
    const createdAt = this.clock.now();
    const ttlMs = input.ttlMs ?? this.ttlMs;
    const record: TokenRecord = {
      id: `tok_${randomBytes(12).toString('base64url')}`,
      hash: hashSecret(token),
      agentId: input.agentId,
      agentName: input.agentName,
      humanId: input.humanId,
      humanLabel: input.humanLabel,
      scopes: [...input.scopes],
      createdAt,
      expiresAt: createdAt + ttlMs,
      ...(input.provisionReason === undefined ? {} : { provisioned: { reason: input.provisionReason, at: createdAt } }),
      ...(input.connectionId === undefined ? {} : { connectionId: input.connectionId }),
      ...(input.resource === undefined ? {} : { resource: input.resource }),
    };
    // A connection's hourly tokens are many: each is remembered a day past expiry, not a month.
    const retention = input.connectionId === undefined ? EXPIRED_TOKEN_RETENTION_MS : SHORT_TOKEN_RETENTION_MS;
    await this.store.saveToken(record, record.expiresAt + retention);
    return { token, record };
  }

  private invalid(detail: string): DomainError {
    return new DomainError('token-invalid', { detail });
  }

  /** Who the token speaks for, and the agent's suspension while one holds (edge refuses its writes). */
  async authenticate(token: string): Promise<Principal> {
    const record = await this.authenticateRecord(token);
    const suspension = await this.store.suspension(record.agentId);
    return { ...principalOf(record), ...(suspension === undefined ? {} : { suspension }) };
  }

  /**
   * The agent rotates the token it calls with (docs/decisions.md §40, §43): a new token of the same
   * agent, human and scopes; the old one works the grace longer, then expires (edge's cache never
   * keeps an answer past a token's expiry). At most TOKEN_ROTATIONS_PER_DAY per agent a UTC day. An
   * MCP host's token rotates by refresh (token-not-rotatable); a suspended agent's is refused.
   */
  async rotate(token: string): Promise<Rotated> {
    const old = await this.authenticateRecord(token);
    if (old.connectionId !== undefined) {
      throw new DomainError('token-not-rotatable', { detail: "This token is an MCP host's access token: it rotates by refresh at the token endpoint." });
    }
    const suspension = await this.store.suspension(old.agentId);
    if (suspension !== undefined) throw suspendedError(suspension);
    const now = this.clock.now();
    const wait = untilMidnightUtc(now);
    const counted = await this.store.countAttempt(`rotate:${old.agentId}`, wait);
    if (counted.count > TOKEN_ROTATIONS_PER_DAY) {
      throw new DomainError('token-rotation-limit', {
        detail: `This agent rotated its token ${TOKEN_ROTATIONS_PER_DAY} times today (UTC), the most a day.`,
        fields: { retry_after: Math.max(1, Math.ceil((counted.resetAt - now) / 1000)), limit: TOKEN_ROTATIONS_PER_DAY },
      });
    }
    const minted = await this.mint(copyOf(old));
    // Cut, never lengthened: an old token closer to its own end keeps that end.
    const previousExpiresAt = Math.min(old.expiresAt, now + this.graceMs);
    await this.store.updateToken({ ...old, expiresAt: previousExpiresAt });
    this.log.info({ tokenId: old.id, newTokenId: minted.record.id, agentId: old.agentId }, 'token rotated');
    return { ...minted, previousExpiresAt, rotationsLeft: TOKEN_ROTATIONS_PER_DAY - counted.count };
  }

  /**
   * The agent's human replaces one of its tokens from /account: a new token of the same agent and
   * scopes (shown once), and the old one revoked at once through the revocation feed. Not counted
   * against the agent's rotations. A connection's token is replaced by reconnecting, not here.
   */
  async replaceForHuman(humanId: string, tokenId: string): Promise<{ token: string; record: TokenRecord; replaced: TokenRecord }> {
    const old = await this.liveOfHumanById(humanId, tokenId);
    if (old === undefined || old.connectionId !== undefined) {
      throw new DomainError('not-found', { detail: 'You approved no live token with this id.', fields: { parameter: 'token_id' } });
    }
    // The new one first: should the revocation fail, the agent is left with a token that works.
    const minted = await this.mint(copyOf(old));
    const replaced = await this.markRevoked(old, 'human');
    this.log.info({ tokenId: old.id, newTokenId: minted.record.id, agentId: old.agentId }, 'token replaced by its human');
    return { ...minted, replaced };
  }

  /** The stored record of a live token, or token-invalid / token-expired. */
  async authenticateRecord(token: string): Promise<TokenRecord> {
    // A malformed token or a wrong checksum never reaches the store.
    if (!isWellFormedToken(token)) throw this.invalid('The token is malformed or its checksum does not match.');
    const record = await this.store.tokenByHash(hashSecret(token));
    if (!record || record.revokedAt !== undefined) throw this.invalid('The token is unknown or was revoked.');
    if (record.expiresAt <= this.clock.now()) {
      throw new DomainError('token-expired', { detail: `The token expired at ${new Date(record.expiresAt).toISOString()}.` });
    }
    return record;
  }

  /** RFC 7009: revoking an unknown, malformed or already revoked token succeeds quietly. */
  async revoke(token: string): Promise<void> {
    if (!isWellFormedToken(token)) return;
    const record = await this.store.tokenByHash(hashSecret(token));
    if (record) await this.markRevoked(record, 'agent');
  }

  /** The approving human revokes from /account; for anyone else the token id does not exist. */
  async revokeForHuman(humanId: string, tokenId: string): Promise<TokenRecord> {
    const record = tokenId === '' ? undefined : await this.store.tokenById(tokenId);
    if (!record || record.humanId !== humanId) {
      throw new DomainError('not-found', { detail: 'You approved no token with this id.', fields: { parameter: 'token_id' } });
    }
    return this.markRevoked(record, 'human');
  }

  /** A token minted for an approval that did not complete: nobody received it, so it never works. */
  async withdraw(record: TokenRecord): Promise<void> {
    await this.markRevoked(record, 'auth');
  }

  /** Every token of a connection stops working, on every edge within the token cache's bound. */
  async revokeConnectionTokens(agentId: string, connectionId: string, by: 'agent' | 'human' | 'auth'): Promise<void> {
    const tokens = (await this.store.tokensOfAgent(agentId)).filter((t) => t.connectionId === connectionId && t.revokedAt === undefined);
    for (const token of tokens) await this.markRevoked(token, by);
  }

  private async markRevoked(record: TokenRecord, by: 'agent' | 'human' | 'auth'): Promise<TokenRecord> {
    if (record.revokedAt !== undefined) return record;
    const revoked = { ...record, revokedAt: this.clock.now() };
    await this.store.updateToken(revoked);
    this.log.info({ tokenId: record.id, agentId: record.agentId, by }, 'token revoked');
    try {
      // After the record: an edge that drops its cached answer and asks again must hear "revoked".
      await this.store.publishRevocation({ tokenId: record.id, agentId: record.agentId, revokedAt: revoked.revokedAt });
    } catch (error) {
      // The revocation stands; edges that cached the token's answer keep it until TOKEN_CACHE_MS runs out.
      this.log.error({ err: error, tokenId: record.id }, 'a revocation was not published to the revocation feed');
    }
    try {
      await this.syncAgent(record);
    } catch (error) {
      // The revocation stands either way; the room's copy of the scopes catches up at the next approval.
      this.log.warn({ err: error, agentId: record.agentId }, 'room did not take the agent scopes after a revocation');
    }
    return revoked;
  }

  /** Follows every revocation from now on, made by this replica or another (`AuthStore.watchRevocations`). */
  watchRevocations(watcher: RevocationWatcher): Promise<() => void> {
    return this.store.watchRevocations(watcher);
  }

  /** The union of the agent's live tokens' scopes, in canonical order (docs/decisions.md §3). */
  async scopesOfAgent(agentId: string): Promise<Scope[]> {
    const held = new Set((await this.liveOfAgent(agentId)).flatMap((t) => t.scopes));
    return SCOPES.filter((scope) => held.has(scope));
  }

  /**
   * Writes the agent record to the room with the union of its live tokens' scopes, and, once every
   * token it had is revoked, when the last one was: the room keeps its profile and leaves it out of lists.
   */
  async syncAgent(agent: { agentId: string; agentName: string; humanLabel: string }): Promise<void> {
    const all = await this.store.tokensOfAgent(agent.agentId);
    const now = this.clock.now();
    const live = all.filter((t) => isLiveToken(t, now));
    const held = new Set(live.flatMap((t) => t.scopes));
    const revokedAt = all.length > 0 && all.every((t) => t.revokedAt !== undefined) ? Math.max(...all.map((t) => t.revokedAt ?? 0)) : undefined;
    await this.room.upsertAgent({
      id: agent.agentId,
      agentName: agent.agentName,
      humanLabel: agent.humanLabel,
      scopes: SCOPES.filter((scope) => held.has(scope)),
      ...(revokedAt === undefined ? {} : { revokedAt: new Date(revokedAt).toISOString() }),
    });
  }

  /** Tokens that still work: not revoked, not expired. */
  async liveOfAgent(agentId: string): Promise<TokenRecord[]> {
    const now = this.clock.now();
    return (await this.store.tokensOfAgent(agentId)).filter((t) => isLiveToken(t, now));
  }

  /** A page of one of the human's lists on /account: its live tokens, newest first, after `after`. */
  pageOfHuman(humanId: string, list: TokenList, limit: number, after?: TokenPosition): Promise<TokenPage> {
    return this.store.liveTokensOfHuman(humanId, list, limit, after);
  }

  /** The live token with this id, if this human approved it. */
  async liveOfHumanById(humanId: string, tokenId: string): Promise<TokenRecord | undefined> {
    const record = tokenId === '' ? undefined : await this.store.tokenById(tokenId);
    return record !== undefined && record.humanId === humanId && isLiveToken(record, this.clock.now()) ? record : undefined;
  }

  /**
   * Every retained token of one agent that this human approved (live, revoked or expired), newest
   * first: none when the agent is not theirs.
   */
  async ofHumanAgent(humanId: string, agentId: string): Promise<TokenRecord[]> {
    return (await this.store.tokensOfAgent(agentId)).filter((t) => t.humanId === humanId);
  }

  /** The live tokens of one agent that this human approved: none when the agent is not theirs. */
  async liveOfHumanAgent(humanId: string, agentId: string): Promise<TokenRecord[]> {
    return (await this.liveOfAgent(agentId)).filter((t) => t.humanId === humanId);
  }
}

/** What a new token of the same agent takes from an old one: its agent, human, scopes, and an operator's mark. */
function copyOf(old: TokenRecord): TokenGrantInput {
  return {
    agentId: old.agentId,
    agentName: old.agentName,
    humanId: old.humanId,
    humanLabel: old.humanLabel,
    scopes: old.scopes,
    ...(old.provisioned === undefined ? {} : { provisionReason: old.provisioned.reason }),
    ...(old.resource === undefined ? {} : { resource: old.resource }),
  };
}

/** The problem a suspended agent's write answers, with the suspension's reason, end and author. */
export function suspendedError(suspension: SuspensionRecord): DomainError {
  const until = suspension.until === undefined ? undefined : new Date(suspension.until).toISOString();
  return new DomainError('agent-suspended', {
    detail: `This agent is suspended by ${suspension.by === 'moderator' ? "the room's moderators" : 'its human'}${until === undefined ? '' : ` until ${until}`}: ${suspension.reason}`,
    fields: { reason: suspension.reason, by: suspension.by, ...(until === undefined ? {} : { until }) },
  });
}

function principalOf(record: TokenRecord): Principal {
  return {
    tokenId: record.id,
    agentId: record.agentId,
    agentName: record.agentName,
    humanLabel: record.humanLabel,
    scopes: record.scopes,
    expiresAt: new Date(record.expiresAt).toISOString(),
    resource: record.resource ?? '',
  };
}
