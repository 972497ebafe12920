import { VIAS, type Via } from '@agentroom/kit/domain';
import type { Logger } from '@agentroom/kit/log';
import { notificationsAppended, notifierLag } from '@agentroom/kit/metrics';
import { inLinkedSpan, SpanKind } from '@agentroom/kit/telemetry';
import { FOLLOWER_LEASE_MS, LeasedFollower, type LeasedFollowerOptions, type LeaseStore } from '@agentroom/kit/store';
import type { Post__Output, PostRemoval__Output, WatchPostsResponse__Output } from '@agentroom/proto';
import { AGENT_ID } from './messages.js';
import { type NotifiedPost, type NotifiedRemoval, postTargets } from './notifications.js';
import type { RoomGateway } from './room.gateway.js';
import type { MessagingStore } from './store.js';

/** The notifier's lease and retry timings (kit's LeasedFollower options). */
export type NotifierOptions = LeasedFollowerOptions;

export const NOTIFIER_LEASE_MS = FOLLOWER_LEASE_MS;

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
    ...(post.removal ? { removal: removalOf(post.removal) } : {}),
  };
}

/** The room's PostRemoval as messaging keeps it. */
export function removalOf(removal: PostRemoval__Output): NotifiedRemoval {
  return { postId: removal.postId, by: removal.by === 'human' ? 'human' : 'moderator', removedAt: removal.removedAt };
}

/** How many of the latest removals the notifier remembers, to tombstone a post it handles after hearing of its removal. */
const REMOVALS_REMEMBERED = 1_000;
/** How many times a removal is noted before it is left to RedactPost. */
const REDACT_ATTEMPTS = 5;

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
  private readonly follower: LeasedFollower<WatchPostsResponse__Output, Post__Output>;
  /** The latest removals heard of, by post id: a post streamed after its removal is notified as its tombstone. */
  private readonly removed = new Map<string, NotifiedRemoval>();

  constructor(
    private readonly store: MessagingStore,
    private readonly room: RoomPosts,
    private readonly log: Logger,
    options: NotifierOptions = {},
  ) {
    const leases: LeaseStore = {
      acquireLease: (owner, ttlMs) => store.acquireNotifierLease(owner, ttlMs),
      releaseLease: (owner) => store.releaseNotifierLease(owner),
      position: () => store.notifierPosition(),
      advancePosition: (owner, id) => store.advanceNotifierPosition(owner, id),
    };
    this.follower = new LeasedFollower(
      leases,
      {
        words: { follower: 'the notifier', source: 'the room', item: 'post' },
        newest: () => room.newestPostId(),
        watch: (after) => room.watchPosts(after),
        // A removal is no post to notify of: noted as it comes, so every read shows its tombstone (docs/decisions.md §42).
        itemOf: (response) => {
          if (response.removed) void this.redact(removalOf(response.removed));
          return response.post ?? undefined;
        },
        idOf: (post) => post.id,
        handle: (post) => this.handle(post),
      },
      log,
      options,
    );
  }

  /** Who holds the lease: unique per process. */
  get owner(): string {
    return this.follower.owner;
  }

  /** True while this replica holds the lease and its watch on the room's posts is positioned: every post made from now on is notified. */
  get isFollowing(): boolean {
    return this.follower.isFollowing;
  }

  start(): void {
    this.follower.start();
  }

  /** Stops following and gives the lease up, so another replica takes over at once. */
  async stop(): Promise<void> {
    await this.follower.stop();
  }

  /** Notes a removal for every read of messaging; tried a few times, since the room tells it once. */
  private async redact(removal: NotifiedRemoval): Promise<void> {
    this.removed.set(removal.postId, removal);
    if (this.removed.size > REMOVALS_REMEMBERED) this.removed.delete(this.removed.keys().next().value as string);
    for (let attempt = 1; ; attempt += 1) {
      try {
        await this.store.redactPost(removal);
        return;
      } catch (error) {
        if (attempt >= REDACT_ATTEMPTS) {
          this.log.error({ err: error, postId: removal.postId }, 'messaging could not note a removed post; RedactPost notes it when called again');
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 250 * 2 ** attempt));
      }
    }
  }

  /**
   * A post's notifications, in a span of their own, a child of the CreatePost that made the post and
   * linked to it (docs/decisions.md §49); its events carry this span on to delivery.
   */
  private handle(post: Post__Output): Promise<void> {
    return inLinkedSpan(
      post.traceparent === '' ? undefined : { traceparent: post.traceparent },
      'notify post',
      {
        kind: SpanKind.CONSUMER,
        attributes: {
          'messaging.operation.type': 'process',
          'messaging.operation.name': 'notify',
          'messaging.destination.name': 'posts',
          'messaging.message.id': post.id,
        },
      },
      async (span) => {
        span.setAttribute('agentroom.notifications', await this.notify(post));
      },
    );
  }

  /** A post's notifications, appended; answers how many. Throws only when the room or storage fails (the post is then handled again). */
  private async notify(post: Post__Output): Promise<number> {
    let notified = notifiedPost(post);
    const removal = this.removed.get(notified.id);
    if (removal && !notified.removal) notified = { ...notified, text: '', mentions: [], removal };
    if (notified.replyTo !== '' && notified.replyToAgentId === '') {
      // A reply made before the room kept the author it answers: asked once.
      notified.replyToAgentId = (await this.room.postAuthor(notified.replyTo)) ?? '';
    }
    // The agents that block the author when the post was made hear nothing of it (docs/decisions.md §40).
    const muted = new Set(post.mutedFor);
    const targets = postTargets(notified, (id) => AGENT_ID.test(id) && !muted.has(id));
    if (targets.length === 0) return 0;
    const { appended } = await this.store.notifyPost(notified, targets);
    for (const notification of appended) notificationsAppended.inc({ type: notification.type });
    if (appended.length > 0) notifierLag.observe(Math.max(0, Date.now() - Date.parse(notified.createdAt)) / 1000);
    return appended.length;
  }
}
