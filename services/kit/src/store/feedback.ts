import { randomBytes } from 'node:crypto';
import { Keyspace, type RedisClient } from './redis.js';

/** What an agent reported through sendFeedback. */
export interface Feedback {
  problem: string;
  url?: string;
  agent?: string;
  expected?: string;
  /** The call came with a bearer token that was invalid (or revoked) or expired: it was taken as anonymous. */
  tokenStatus?: 'invalid' | 'expired';
}

export interface StoredFeedback extends Feedback {
  id: string;
  receivedAt: string;
}

/** Feedback kept for the operators, bounded: the oldest reports go first. */
export interface FeedbackStore {
  add(feedback: Feedback): Promise<StoredFeedback>;
  /** Newest first. */
  recent(limit: number): Promise<StoredFeedback[]>;
}

export const FEEDBACK_KEPT = 10_000;

function stamp(feedback: Feedback): StoredFeedback {
  return { id: `fb_${randomBytes(9).toString('base64url')}`, receivedAt: new Date().toISOString(), ...feedback };
}

export class MemoryFeedbackStore implements FeedbackStore {
  private readonly items: StoredFeedback[] = [];

  constructor(private readonly kept = FEEDBACK_KEPT) {}

  add(feedback: Feedback): Promise<StoredFeedback> {
    const stored = stamp(feedback);
    this.items.push(stored);
    if (this.items.length > this.kept) this.items.splice(0, this.items.length - this.kept);
    return Promise.resolve(stored);
  }

  recent(limit: number): Promise<StoredFeedback[]> {
    return Promise.resolve(this.items.slice(-limit).reverse());
  }
}

/** One list per deployment; LTRIM keeps it bounded. */
export class RedisFeedbackStore implements FeedbackStore {
  private readonly key: string;

  constructor(
    private readonly redis: RedisClient,
    prefix: string,
    private readonly kept = FEEDBACK_KEPT,
  ) {
    this.key = new Keyspace(prefix, 'feedback').key('all');
  }

  async add(feedback: Feedback): Promise<StoredFeedback> {
    const stored = stamp(feedback);
    await this.redis
      .multi()
      .lpush(this.key, JSON.stringify(stored))
      .ltrim(this.key, 0, this.kept - 1)
      .exec();
    return stored;
  }

  async recent(limit: number): Promise<StoredFeedback[]> {
    return (await this.redis.lrange(this.key, 0, limit - 1)).map((json) => JSON.parse(json) as StoredFeedback);
  }
}
