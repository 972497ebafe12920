import { randomBytes } from 'node:crypto';
import { DomainError, hashSecret, isWellFormedToken, mintToken, type PublicUrls, type Scope } from '@agentroom/kit';
import type { TokenRecord } from './records.js';
import type { AuthStore } from './store.js';

const DAY_MS = 86_400_000;

/** Who a token speaks for, once authenticated. */
export interface Principal {
  tokenId: string;
  agentId: string;
  agentName: string;
  humanLabel: string;
  scopes: Scope[];
  expiresAt: string;
}

/** Bearer tokens: minted at approval, stored as hashes, authenticated on every call, revocable. */
export class Tokens {
  constructor(
    private readonly store: AuthStore,
    private readonly urls: PublicUrls,
    private readonly ttlDays: number,
    private readonly now: () => number,
  ) {}

  /** A new token with frozen scopes; the plaintext is answered once and never stored. */
  async mint(input: { agentId: string; agentName: string; humanId: string; humanLabel: string; scopes: Scope[] }): Promise<{ token: string; record: TokenRecord }> {
    const token = mintToken();
    const createdAt = this.now();
    const record: TokenRecord = {
      id: `tok_${randomBytes(9).toString('base64url')}`,
      hash: hashSecret(token),
      ...input,
      createdAt,
      expiresAt: createdAt + this.ttlDays * DAY_MS,
    };
    await this.store.saveToken(record);
    return { token, record };
  }

  private invalid(detail: string): DomainError {
    return new DomainError('token-invalid', {
      detail,
      remedy: `Get a new token: POST ${this.urls.apiUrl}/agent/signup/start and have a human approve it.`,
    });
  }

  async authenticate(token: string): Promise<Principal> {
    const record = await this.authenticateRecord(token);
    return {
      tokenId: record.id,
      agentId: record.agentId,
      agentName: record.agentName,
      humanLabel: record.humanLabel,
      scopes: record.scopes,
      expiresAt: new Date(record.expiresAt).toISOString(),
    };
  }

  /** The stored record of a live token, or token-invalid / token-expired. */
  async authenticateRecord(token: string): Promise<TokenRecord> {
    // A malformed token or a wrong checksum never reaches the store.
    if (!isWellFormedToken(token)) throw this.invalid('The token is malformed or its checksum does not match.');
    const record = await this.store.tokenByHash(hashSecret(token));
    if (!record || record.revokedAt !== undefined) throw this.invalid('The token is unknown or was revoked.');
    if (record.expiresAt <= this.now()) {
      throw new DomainError('token-expired', {
        detail: `The token expired at ${new Date(record.expiresAt).toISOString()}.`,
        remedy: `Get a new token: POST ${this.urls.apiUrl}/agent/signup/start with the scopes you need and have a human approve it.`,
      });
    }
    return record;
  }

  /** RFC 7009: revoking an unknown or malformed token succeeds quietly. */
  async revoke(token: string): Promise<TokenRecord | undefined> {
    if (!isWellFormedToken(token)) return undefined;
    const record = await this.store.tokenByHash(hashSecret(token));
    return record ? this.markRevoked(record) : undefined;
  }

  /** The approving human revokes from /account; nobody else can. */
  async revokeForHuman(humanId: string, tokenId: string): Promise<TokenRecord> {
    const record = await this.store.tokenById(tokenId);
    if (!record || record.humanId !== humanId) {
      throw new DomainError('not-found', { detail: 'You approved no token with this id.', remedy: `See the tokens you approved at ${this.urls.siteUrl}/account.` });
    }
    return this.markRevoked(record);
  }

  private async markRevoked(record: TokenRecord): Promise<TokenRecord> {
    if (record.revokedAt !== undefined) return record;
    const revoked = { ...record, revokedAt: this.now() };
    await this.store.saveToken(revoked);
    return revoked;
  }

  /** Tokens that still work: not revoked, not expired. */
  async liveOfAgent(agentId: string): Promise<TokenRecord[]> {
    const now = this.now();
    return (await this.store.tokensOfAgent(agentId)).filter((t) => t.revokedAt === undefined && t.expiresAt > now);
  }

  async liveOfHuman(humanId: string): Promise<TokenRecord[]> {
    const now = this.now();
    return (await this.store.tokensOfHuman(humanId)).filter((t) => t.revokedAt === undefined && t.expiresAt > now);
  }
}
