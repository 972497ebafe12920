import { VIAS, type Via } from '@agentroom/kit/domain';
import type { ServiceClient } from '@agentroom/kit/grpc';
import type { Logger } from '@agentroom/kit/log';
import { recordArchiveLag, recordPosts, recordPostsArchived } from '@agentroom/kit/metrics';
import { pauseUnlessAborted } from '@agentroom/kit/process';
import { LeasedFollower, type LeasedFollowerOptions } from '@agentroom/kit/store';
import type { Post__Output, PostRemoval__Output, RoomServiceClient, WatchPostsResponse__Output } from '@agentroom/proto';
import type { ArchivedPost, RecordStore } from './store.js';

/** The archiver's lease and retry timings (kit's LeasedFollower options). */
export type ArchiverOptions = LeasedFollowerOptions & {
  /** Days a post is kept; 0 keeps every post (RECORD_RETENTION_DAYS). */
  retentionDays?: number;
  /** How often the holder of the lease drops what retention lets go (ms). */
  retentionEveryMs?: number;
};

/**
 * The most posts kept in one transaction: a backlog (catching up after an outage) is written 1,000
 * rows a step, while the next thousand arrive from the room (docs/decisions.md §38).
 */
const BATCH = 1_000;
const DAY_MS = 86_400_000;
const RETENTION_EVERY_MS = 3_600_000;
/** How many times the follower tries to erase one removed post before it leaves it to ErasePost. */
const ERASE_ATTEMPTS = 5;

/**
 * The via of a streamed post; one this build does not know (a newer room's) is kept as `rest`
 * rather than refused: a post the record refuses would fail its batch on every retry and stop the archiver.
 */
function viaOf(value: Post__Output['via'] | number): Via {
  // An enum value this build's proto lacks arrives as its number.
  const name = String(value).replace(/^VIA_/, '').toLowerCase();
  return VIAS.find((known) => known === name) ?? 'rest';
}

/** A post as the room streamed it, as the record keeps it. */
export function archivedPost(post: Post__Output): ArchivedPost {
  return {
    id: post.id,
    agentId: post.agentId,
    agentName: post.agentName,
    humanLabel: post.humanLabel,
    text: post.text,
    via: viaOf(post.via),
    createdAt: post.createdAt,
    ...(post.replyTo === '' ? {} : { replyTo: post.replyTo }),
    ...(post.threadId === '' ? {} : { threadId: post.threadId }),
    ...(post.replyToAgentId === '' ? {} : { replyToAgentId: post.replyToAgentId }),
    mentions: post.mentions.map((mention) => ({ agentId: mention.agentId, agentName: mention.agentName })),
    ...(post.removal ? { removal: { postId: post.id, by: post.removal.by === 'human' ? 'human' : 'moderator', removedAt: post.removal.removedAt } } : {}),
  };
}

/**
 * Keeps the room's posts in the record: follows WatchPosts from the position kept in the record's
 * own store, under its lease (kit's LeasedFollower: one replica archives at a time, another takes
 * over within the lease when it dies), and keeps every post waiting in one transaction (a batch)
 * that also moves the position on. A batch handed over again (another replica's, after a lease
 * lapsed) changes nothing: the store keeps each post id once. docs/decisions.md §34 and §38.
 */
export class Archiver {
  private readonly follower: LeasedFollower<WatchPostsResponse__Output, Post__Output>;
  private lastLagMs = 0;
  private readonly stopping = new AbortController();
  private retention: Promise<void> | undefined;

  constructor(
    private readonly store: RecordStore,
    room: Pick<ServiceClient<RoomServiceClient>, 'watch'>,
    private readonly log: Logger,
    private readonly options: ArchiverOptions = {},
  ) {
    this.follower = new LeasedFollower(
      store,
      {
        words: { follower: 'the record', source: 'the room', item: 'post', startsFrom: 'from the start of its stream (every post it still holds)' },
        // A new record keeps everything the room still holds, not only what comes next.
        newest: () => Promise.resolve('0-0'),
        watch: (after) => room.watch('watchPosts', { afterId: after }),
        // A removal is no post to archive: it is erased on its own, as it comes (docs/decisions.md §42).
        itemOf: (response) => {
          if (response.removed) void this.erase(response.removed);
          return response.post ?? undefined;
        },
        idOf: (post) => post.id,
        handleBatchAndAdvance: (owner, posts) => this.archive(owner, posts),
        maxBatch: BATCH,
      },
      log,
      options,
    );
  }

  /** Who holds the lease: unique per process. */
  get owner(): string {
    return this.follower.owner;
  }

  /** True while this replica holds the lease and its watch on the room is positioned: every post made from now on is archived here. */
  get isFollowing(): boolean {
    return this.follower.isFollowing;
  }

  /** ms between the newest post's creation and its arrival in the record, as last measured by this replica. */
  get lagMs(): number {
    return this.lastLagMs;
  }

  start(): void {
    this.follower.start();
    if ((this.options.retentionDays ?? 0) > 0) this.retention ??= this.dropOldPosts();
  }

  /** Stops following and gives the lease up, so another replica takes over at once. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await Promise.all([this.follower.stop(), this.retention]);
  }

  /** Stops at once, keeping the lease until it lapses (tests: a replica that died). */
  abandon(): void {
    this.stopping.abort();
    this.follower.abandon();
  }

  /** Keeps `posts` and moves the position past them in one step; answers whether `owner` still held the lease. */
  private async archive(owner: string, posts: Post__Output[]): Promise<boolean> {
    const archived = posts.map(archivedPost);
    // A tombstone the room replays (removed before the record read it) keeps its removal: noted first, it is archived as one.
    for (const post of archived) if (post.removal) await this.store.erasePost(post.removal);
    const { kept, held } = await this.store.archiveAndAdvance(owner, archived);
    const now = Date.now();
    let lagMs = Number.NaN;
    for (const post of posts) {
      lagMs = Math.max(0, now - Date.parse(post.createdAt));
      // Measured, never thrown on: the posts are kept already.
      if (Number.isFinite(lagMs)) recordArchiveLag.observe(lagMs / 1000);
    }
    if (Number.isFinite(lagMs)) this.lastLagMs = lagMs;
    recordPostsArchived.inc(kept);
    recordPosts.inc(kept);
    return held;
  }

  /**
   * Erases a post the room removed: its text and search document go, its tombstone stays; a post not
   * archived yet is kept as its tombstone when it comes. Tried a few times: the room says it once.
   */
  private async erase(removed: PostRemoval__Output): Promise<void> {
    const removal = { postId: removed.postId, by: removed.by === 'human' ? ('human' as const) : ('moderator' as const), removedAt: removed.removedAt };
    for (let attempt = 1; ; attempt += 1) {
      try {
        await this.store.erasePost(removal);
        return;
      } catch (error) {
        if (attempt >= ERASE_ATTEMPTS || this.stopping.signal.aborted) {
          this.log.error({ err: error, postId: removal.postId }, 'the record could not erase a removed post; ErasePost erases it when called again');
          return;
        }
        await pauseUnlessAborted(250 * 2 ** attempt, this.stopping.signal);
      }
    }
  }

  /** Retention: while this replica archives, the posts older than RECORD_RETENTION_DAYS go, at once and then every hour. */
  private async dropOldPosts(): Promise<void> {
    const days = this.options.retentionDays ?? 0;
    const everyMs = this.options.retentionEveryMs ?? RETENTION_EVERY_MS;
    const signal = this.stopping.signal;
    let lastRun = 0;
    while (!signal.aborted) {
      // Whichever replica archives drops: a takeover is noticed within a few seconds.
      if (this.follower.isFollowing && Date.now() - lastRun >= everyMs) {
        lastRun = Date.now();
        try {
          const dropped = await this.store.dropBefore(Date.now() - days * DAY_MS);
          recordPosts.dec(dropped);
          if (dropped > 0) this.log.info({ dropped, retentionDays: days }, `the record let go of ${dropped} post(s) older than ${days} day(s)`);
        } catch (error) {
          this.log.warn({ err: error }, 'the record could not drop the posts past its retention; it tries again later');
        }
      }
      await pauseUnlessAborted(Math.min(everyMs, 5_000), signal);
    }
  }
}
