import type { DeviceFlow, Human, Session, TokenRecord } from './records.js';

/**
 * Where auth keeps flows, tokens, humans and sessions. Two implementations, Redis and memory,
 * held to one contract suite. Secrets are stored only as hashes.
 */
export interface AuthStore {
  readonly kind: 'redis' | 'memory';
  /** Stores a new flow and its user-code index until `expiresAt`. */
  createFlow(flow: DeviceFlow): Promise<void>;
  flowByDevice(deviceHash: string): Promise<DeviceFlow | undefined>;
  flowByUserCode(userCode: string): Promise<DeviceFlow | undefined>;
  /** Replaces a flow, keeping its expiry. */
  updateFlow(flow: DeviceFlow): Promise<void>;
  /** Removes and answers the flow in one step: of concurrent takers, exactly one gets it. */
  takeFlow(deviceHash: string): Promise<DeviceFlow | undefined>;
  deleteFlow(flow: DeviceFlow): Promise<void>;
  /** True when no poll of this flow happened in the last `intervalMs`; records this one. */
  admitPoll(deviceHash: string, intervalMs: number, now: number): Promise<{ admitted: boolean; retryAfterMs: number }>;

  saveToken(token: TokenRecord): Promise<void>;
  tokenByHash(hash: string): Promise<TokenRecord | undefined>;
  tokenById(id: string): Promise<TokenRecord | undefined>;
  /** Every token a human approved, newest first (revoked ones included). */
  tokensOfHuman(humanId: string): Promise<TokenRecord[]>;
  tokensOfAgent(agentId: string): Promise<TokenRecord[]>;

  /** Creates a human; false when the name (case-insensitive) is taken. */
  createHuman(human: Human): Promise<boolean>;
  humanByName(name: string): Promise<Human | undefined>;
  humanById(id: string): Promise<Human | undefined>;

  saveSession(session: Session, ttlMs: number): Promise<void>;
  session(idHash: string): Promise<Session | undefined>;
  deleteSession(idHash: string): Promise<void>;

  /** Counts one event under `key` in a window that starts with the first; answers the count. */
  countAttempt(key: string, windowMs: number, now: number): Promise<number>;
  /** The count of a window still running, 0 when none is. */
  attemptCount(key: string): Promise<number>;

  ping(): Promise<void>;
}

export function nameKey(name: string): string {
  return name.trim().normalize('NFKC').toLowerCase();
}
