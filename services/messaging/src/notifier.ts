import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { fromServiceError, type Logger, notificationsAppended, notifierLag, VIAS, type Via } from '@agentroom/kit';
import type { Post__Output, WatchPostsResponse__Output } from '@agentroom/proto';
import { AGENT_ID } from './messages.js';
import { type NotifiedPost, postTargets } from './notifications.js';
import type { RoomGateway } from './room.gateway.js';
import type { MessagingStore } from './store.js';

export interface NotifierOptions {
  /** How long the lease lasts unless its holder renews it (ms). */
  leaseMs?: number;
  /** How often the holder renews the lease, and another replica tries to take it (ms); a third of the lease by default. */
  renewMs?: number;
  /** The first wait after a failure (the room or storage unreachable, the watch ended), doubled up to `maxRetryMs`. */
  retryMs?: number;
  maxRetryMs?: number;
  /** Who holds the lease: unique per process. */
  owner?: string;
}

export const NOTIFIER_LEASE_MS = 10_000;

/** Above this many posts waiting, the watch is paused (gRPC flow control holds the room back); resumed below LOW_WATER. */
const HIGH_WATER = 256;
const LOW_WATER = 32;
/**
 * The position is stored once no post waits, or after this many: a backlog costs one round trip
 * per post, not two. A crash then hands at most this many posts over again, each notified once.
 */
const POSITION_EVERY = 64;

/** What the notifier needs of the room: its posts, followed from a position. */
export type RoomPosts = Pick<RoomGateway, 'newestPostId' | 'postAuthor' | 'watchPosts'>;

function viaOf(value: string): Via {
  const name = value.replace(/^VIA_/, '').toLowerCase();
  return (VIAS as readonly string[]).includes(name) ? (name as Via) : 'rest';
}

/** A post as the room streamed it, as its notifications keep it. */
export function notifiedPost(post: Post__Output): NotifiedPost {
  return {
    id: post.id,
    agentId: post.agentId,
    agentName: post.agentName,
    humanLabel: post.humanLabel,
    text: post.text,
    via: viaOf(post.via),
    createdAt: post.createdAt,
    replyTo: post.replyTo,
    threadId: post.threadId,
    replyToAgentId: post.replyToAgentId,
    mentions: post.mentions.map((mention) => ({ agentId: mention.agentId, agentName: mention.agentName })),
  };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * Turns the room's posts into notifications: follows WatchPosts from the position kept in the store
 * (the id of the last post it handled), appends each post's notifications, then moves the position
 * on. Several replicas may run one each: only the holder of the store's lease follows, renewing it
 * every `renewMs`; another takes over once it lapses, or at once when its holder stops. A restart,
 * a broken stream or a takeover resumes after the stored position, so no post is missed; a post
 * handled again (appended, then a crash before the position moved) is not notified twice, since the
 * store takes each (agent, post) once.
 */
export class Notifier {
  readonly owner: string;
  private readonly leaseMs: number;
  private readonly renewMs: number;
  private readonly retryMs: number;
  private readonly maxRetryMs: number;
  private readonly stopping = new AbortController();
  private running: Promise<void> | undefined;
  private holding = false;
  private following = false;
  /** A failure was logged, and no watch got positioned since: the next one says it recovered. */
  private troubled = false;

  constructor(
    private readonly store: MessagingStore,
    private readonly room: RoomPosts,
    private readonly log: Logger,
    options: NotifierOptions = {},
  ) {
    this.owner = options.owner ?? `${hostname()}/${process.pid}/${randomBytes(4).toString('hex')}`;
    this.leaseMs = options.leaseMs ?? NOTIFIER_LEASE_MS;
    this.renewMs = options.renewMs ?? Math.floor(this.leaseMs / 3);
    this.retryMs = options.retryMs ?? 250;
    this.maxRetryMs = options.maxRetryMs ?? 5_000;
  }

  /** True while this replica holds the lease and its watch on the room's posts is positioned: every post made from now on is notified. */
  get isFollowing(): boolean {
    return this.following;
  }

  start(): void {
    this.running ??= this.run();
  }

  /** Stops following and gives the lease up, so another replica takes over at once. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await this.running;
    if (this.holding) await this.store.releaseNotifierLease(this.owner).catch(() => undefined);
    this.holding = false;
  }

  private async run(): Promise<void> {
    const stop = this.stopping.signal;
    let failures = 0;
    while (!stop.aborted) {
      try {
        if (!(await this.store.acquireNotifierLease(this.owner, this.leaseMs))) {
          this.holding = false;
          await sleep(this.renewMs, stop);
          continue;
        }
        this.holding = true;
        if (await this.lead()) failures = 0;
      } catch (error) {
        if (failures === 0 && !stop.aborted) {
          this.log.warn({ err: error }, 'the notifier stopped following the room (room or storage unreachable); it resumes after the last post it handled');
          this.troubled = true;
        }
        failures += 1;
      }
      // The watch ended, or failed: resume after the stored position, a moment later.
      await sleep(failures === 0 ? this.retryMs : Math.min(this.retryMs * 2 ** (failures - 1), this.maxRetryMs), stop);
    }
  }

  /** Follows the room while the lease is held; answers whether the watch got positioned (a healthy session). */
  private async lead(): Promise<boolean> {
    const session = new AbortController();
    const signal = AbortSignal.any([this.stopping.signal, session.signal]);
    let renewedAt = Date.now();
    const lost = (): void => {
      this.holding = false;
      session.abort();
    };
    // Renewed while it follows; when it is lost, or cannot be renewed for a whole lease, following stops.
    const renew = setInterval(() => {
      this.store.acquireNotifierLease(this.owner, this.leaseMs).then(
        (held) => {
          if (held) renewedAt = Date.now();
          else if (!signal.aborted) lost();
        },
        () => {
          if (Date.now() - renewedAt >= this.leaseMs && !signal.aborted) lost();
        },
      );
    }, this.renewMs);
    try {
      let position = await this.store.notifierPosition();
      if (position === undefined) {
        // A new deployment: from now on, made durable at once, so posts made while it restarts count.
        position = await this.room.newestPostId();
        if (!(await this.store.advanceNotifierPosition(this.owner, position))) {
          lost();
          return false;
        }
        this.log.info({ after: position }, 'the notifier starts: no position was stored, so it follows the room from its newest post');
      }
      return await this.follow(position, signal, lost);
    } finally {
      clearInterval(renew);
      this.following = false;
    }
  }

  /**
   * One WatchPosts call from `after`: each post handled in order, and the position stored after it
   * (once the posts waiting are handled, or every POSITION_EVERY). Ends with the call, or `signal`.
   */
  private async follow(after: string, signal: AbortSignal, lost: () => void): Promise<boolean> {
    const call = this.room.watchPosts(after);
    const queue: Post__Output[] = [];
    let positioned = false;
    let ended: Error | undefined;
    let wake: (() => void) | undefined;
    const poke = (): void => {
      wake?.();
      wake = undefined;
    };
    call.on('metadata', () => {
      positioned = true;
      this.following = true;
      if (this.troubled) this.log.info({ after }, 'the notifier follows the room again');
      else this.log.debug({ after }, 'the notifier follows the room');
      this.troubled = false;
      poke();
    });
    call.on('data', (response: WatchPostsResponse__Output) => {
      if (response.post) queue.push(response.post);
      if (queue.length >= HIGH_WATER) call.pause();
      poke();
    });
    call.on('error', (error) => {
      ended ??= fromServiceError(error);
      poke();
    });
    call.on('end', () => {
      ended ??= new Error('the room ended the watch');
      poke();
    });
    signal.addEventListener('abort', poke, { once: true });
    let handled: string | undefined;
    let unstored = 0;
    /** Stores the last post handled; false once the lease is someone else's. */
    const storePosition = async (): Promise<boolean> => {
      if (handled === undefined) return true;
      const stored = await this.store.advanceNotifierPosition(this.owner, handled);
      handled = undefined;
      unstored = 0;
      if (!stored) lost();
      return stored;
    };
    try {
      for (;;) {
        if (signal.aborted) {
          // Stopping: what was handled is stored (best effort), so the next holder need not hand it over again.
          await storePosition().catch(() => undefined);
          return positioned;
        }
        const post = queue.shift();
        if (post) {
          if (queue.length <= LOW_WATER && call.isPaused()) call.resume();
          await this.handle(post);
          handled = post.id;
          unstored += 1;
          if ((queue.length === 0 || unstored >= POSITION_EVERY) && !(await storePosition())) return positioned;
          continue;
        }
        // Everything received is handled: a call that ended is done with.
        if (ended) {
          if (!signal.aborted) this.log.debug({ err: ended }, 'the watch on the room ended; the notifier resumes after the last post it handled');
          return positioned;
        }
        await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      signal.removeEventListener('abort', poke);
      call.cancel();
    }
  }

  /** A post's notifications, appended. Throws only when the room or storage fails (the post is then handled again). */
  private async handle(post: Post__Output): Promise<void> {
    const notified = notifiedPost(post);
    if (notified.replyTo !== '' && notified.replyToAgentId === '') {
      // A reply made before the room kept the author it answers: asked once.
      notified.replyToAgentId = (await this.room.postAuthor(notified.replyTo)) ?? '';
    }
    const targets = postTargets(notified, (id) => AGENT_ID.test(id));
    if (targets.length === 0) return;
    const { appended } = await this.store.notifyPost(notified, targets);
    for (const notification of appended) notificationsAppended.inc({ type: notification.type });
    if (appended.length > 0) notifierLag.observe(Math.max(0, Date.now() - Date.parse(notified.createdAt)) / 1000);
  }
}
