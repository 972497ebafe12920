import { Keyspace, type Redis } from '@agentroom/kit';
import type { DeviceFlow, Human, Session, TokenRecord } from './records.js';
import { type AuthStore, nameKey } from './store.js';

function parse<T>(json: string | null): T | undefined {
  return json === null ? undefined : (JSON.parse(json) as T);
}

/**
 * Auth's records in Redis, each under its own hash tag (`{flow:…}`, `{token:…}`, …): no operation
 * needs two keys at once, so every one runs on Redis Cluster. Expiring records carry TTLs.
 */
export class RedisAuthStore implements AuthStore {
  readonly kind = 'redis';
  private readonly keys: Keyspace;

  constructor(
    private readonly redis: Redis,
    prefix: string,
  ) {
    this.keys = new Keyspace(prefix, 'auth');
  }

  private flowKey(hash: string): string {
    return this.keys.key(`flow:${hash}`);
  }

  private codeKey(code: string): string {
    return this.keys.key(`code:${code}`);
  }

  async createFlow(flow: DeviceFlow): Promise<void> {
    const ttl = Math.max(1, flow.retainUntil - flow.createdAt);
    await this.redis.set(this.flowKey(flow.deviceHash), JSON.stringify(flow), 'PX', ttl);
    await this.redis.set(this.codeKey(flow.userCode), flow.deviceHash, 'PX', ttl);
  }

  async flowByDevice(deviceHash: string): Promise<DeviceFlow | undefined> {
    return parse<DeviceFlow>(await this.redis.get(this.flowKey(deviceHash)));
  }

  async flowByUserCode(userCode: string): Promise<DeviceFlow | undefined> {
    const hash = await this.redis.get(this.codeKey(userCode));
    return hash === null ? undefined : this.flowByDevice(hash);
  }

  async updateFlow(flow: DeviceFlow): Promise<void> {
    // XX: a flow that expired meanwhile stays gone; KEEPTTL: it still ends when it was due to.
    await this.redis.set(this.flowKey(flow.deviceHash), JSON.stringify(flow), 'KEEPTTL', 'XX');
  }

  async takeFlow(deviceHash: string): Promise<DeviceFlow | undefined> {
    const flow = parse<DeviceFlow>(await this.redis.getdel(this.flowKey(deviceHash)));
    if (flow) await this.redis.del(this.codeKey(flow.userCode));
    return flow;
  }

  async deleteFlow(flow: DeviceFlow): Promise<void> {
    await this.redis.del(this.flowKey(flow.deviceHash));
    await this.redis.del(this.codeKey(flow.userCode));
  }

  async admitPoll(deviceHash: string, intervalMs: number, now: number): Promise<{ admitted: boolean; retryAfterMs: number }> {
    const key = this.keys.key(`poll:${deviceHash}`);
    const set = await this.redis.set(key, String(now), 'PX', intervalMs, 'NX');
    if (set === 'OK') return { admitted: true, retryAfterMs: 0 };
    return { admitted: false, retryAfterMs: Math.max(1, await this.redis.pttl(key)) };
  }

  async saveToken(token: TokenRecord): Promise<void> {
    await this.redis.set(this.keys.key(`token:${token.hash}`), JSON.stringify(token));
    await this.redis.set(this.keys.key(`token-id:${token.id}`), token.hash);
    await this.redis.zadd(this.keys.key(`human:${token.humanId}`, 'tokens'), token.createdAt, token.id);
    await this.redis.zadd(this.keys.key(`agent:${token.agentId}`, 'tokens'), token.createdAt, token.id);
  }

  async tokenByHash(hash: string): Promise<TokenRecord | undefined> {
    return parse<TokenRecord>(await this.redis.get(this.keys.key(`token:${hash}`)));
  }

  async tokenById(id: string): Promise<TokenRecord | undefined> {
    const hash = await this.redis.get(this.keys.key(`token-id:${id}`));
    return hash === null ? undefined : this.tokenByHash(hash);
  }

  private async tokensIn(setKey: string): Promise<TokenRecord[]> {
    const ids = await this.redis.zrevrange(setKey, 0, -1);
    const tokens = await Promise.all(ids.map((id) => this.tokenById(id)));
    return tokens.filter((token): token is TokenRecord => token !== undefined);
  }

  tokensOfHuman(humanId: string): Promise<TokenRecord[]> {
    return this.tokensIn(this.keys.key(`human:${humanId}`, 'tokens'));
  }

  tokensOfAgent(agentId: string): Promise<TokenRecord[]> {
    return this.tokensIn(this.keys.key(`agent:${agentId}`, 'tokens'));
  }

  async createHuman(human: Human): Promise<boolean> {
    const claimed = await this.redis.set(this.keys.key(`name:${nameKey(human.name)}`), human.id, 'NX');
    if (claimed !== 'OK') return false;
    await this.redis.set(this.keys.key(`human:${human.id}`), JSON.stringify(human));
    return true;
  }

  async humanByName(name: string): Promise<Human | undefined> {
    const id = await this.redis.get(this.keys.key(`name:${nameKey(name)}`));
    return id === null ? undefined : this.humanById(id);
  }

  async humanById(id: string): Promise<Human | undefined> {
    return parse<Human>(await this.redis.get(this.keys.key(`human:${id}`)));
  }

  async saveSession(session: Session, ttlMs: number): Promise<void> {
    await this.redis.set(this.keys.key(`session:${session.idHash}`), JSON.stringify(session), 'PX', Math.max(1, ttlMs));
  }

  async session(idHash: string): Promise<Session | undefined> {
    return parse<Session>(await this.redis.get(this.keys.key(`session:${idHash}`)));
  }

  async deleteSession(idHash: string): Promise<void> {
    await this.redis.del(this.keys.key(`session:${idHash}`));
  }

  async countAttempt(key: string, windowMs: number): Promise<number> {
    const redisKey = this.keys.key(`attempts:${key}`);
    const [[, count] = []] = (await this.redis.multi().incr(redisKey).pexpire(redisKey, windowMs, 'NX').exec()) ?? [];
    return Number(count);
  }

  async attemptCount(key: string): Promise<number> {
    return Number((await this.redis.get(this.keys.key(`attempts:${key}`))) ?? 0);
  }

  async ping(): Promise<void> {
    await this.redis.ping();
  }
}
