import type { DeviceFlow, Human, Session, TokenRecord } from './records.js';
import { type AuthStore, nameKey } from './store.js';

interface Expiring<T> {
  value: T;
  expiresAt: number;
}

/** A map whose entries lapse at their own time, as Redis keys with a TTL do. */
class ExpiringMap<T> {
  private readonly entries = new Map<string, Expiring<T>>();

  constructor(private readonly now: () => number) {}

  get(key: string): T | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= this.now()) {
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

/** The embedded default: everything in this process, lost on restart. */
export class MemoryAuthStore implements AuthStore {
  readonly kind = 'memory';
  private readonly flows: ExpiringMap<DeviceFlow>;
  private readonly codes: ExpiringMap<string>;
  private readonly polls: ExpiringMap<number>;
  private readonly tokens = new Map<string, TokenRecord>();
  private readonly tokenIds = new Map<string, string>();
  private readonly humans = new Map<string, Human>();
  private readonly names = new Map<string, string>();
  private readonly sessions: ExpiringMap<Session>;
  private readonly attempts: ExpiringMap<number>;

  constructor(now: () => number = Date.now) {
    this.flows = new ExpiringMap(now);
    this.codes = new ExpiringMap(now);
    this.polls = new ExpiringMap(now);
    this.sessions = new ExpiringMap(now);
    this.attempts = new ExpiringMap(now);
  }

  createFlow(flow: DeviceFlow): Promise<void> {
    this.flows.set(flow.deviceHash, structuredClone(flow), flow.retainUntil);
    this.codes.set(flow.userCode, flow.deviceHash, flow.retainUntil);
    return Promise.resolve();
  }

  flowByDevice(deviceHash: string): Promise<DeviceFlow | undefined> {
    const flow = this.flows.get(deviceHash);
    return Promise.resolve(flow && structuredClone(flow));
  }

  flowByUserCode(userCode: string): Promise<DeviceFlow | undefined> {
    const hash = this.codes.get(userCode);
    return hash === undefined ? Promise.resolve(undefined) : this.flowByDevice(hash);
  }

  updateFlow(flow: DeviceFlow): Promise<void> {
    const expiresAt = this.flows.expiryOf(flow.deviceHash);
    if (expiresAt !== undefined) this.flows.set(flow.deviceHash, structuredClone(flow), expiresAt);
    return Promise.resolve();
  }

  takeFlow(deviceHash: string): Promise<DeviceFlow | undefined> {
    const flow = this.flows.get(deviceHash);
    if (flow) void this.deleteFlow(flow);
    return Promise.resolve(flow);
  }

  deleteFlow(flow: DeviceFlow): Promise<void> {
    this.flows.delete(flow.deviceHash);
    this.codes.delete(flow.userCode);
    return Promise.resolve();
  }

  admitPoll(deviceHash: string, intervalMs: number, now: number): Promise<{ admitted: boolean; retryAfterMs: number }> {
    const until = this.polls.get(deviceHash);
    if (until !== undefined) return Promise.resolve({ admitted: false, retryAfterMs: until - now });
    this.polls.set(deviceHash, now + intervalMs, now + intervalMs);
    return Promise.resolve({ admitted: true, retryAfterMs: 0 });
  }

  saveToken(token: TokenRecord): Promise<void> {
    this.tokens.set(token.hash, structuredClone(token));
    this.tokenIds.set(token.id, token.hash);
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

  tokensOfHuman(humanId: string): Promise<TokenRecord[]> {
    return Promise.resolve([...this.tokens.values()].filter((t) => t.humanId === humanId).sort((a, b) => b.createdAt - a.createdAt).map((t) => structuredClone(t)));
  }

  tokensOfAgent(agentId: string): Promise<TokenRecord[]> {
    return Promise.resolve([...this.tokens.values()].filter((t) => t.agentId === agentId).sort((a, b) => b.createdAt - a.createdAt).map((t) => structuredClone(t)));
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

  saveSession(session: Session, _ttlMs: number): Promise<void> {
    this.sessions.set(session.idHash, structuredClone(session), session.expiresAt);
    return Promise.resolve();
  }

  session(idHash: string): Promise<Session | undefined> {
    return Promise.resolve(this.sessions.get(idHash));
  }

  deleteSession(idHash: string): Promise<void> {
    this.sessions.delete(idHash);
    return Promise.resolve();
  }

  countAttempt(key: string, windowMs: number, now: number): Promise<number> {
    const count = (this.attempts.get(key) ?? 0) + 1;
    this.attempts.set(key, count, this.attempts.expiryOf(key) ?? now + windowMs);
    return Promise.resolve(count);
  }

  attemptCount(key: string): Promise<number> {
    return Promise.resolve(this.attempts.get(key) ?? 0);
  }

  ping(): Promise<void> {
    return Promise.resolve();
  }
}
