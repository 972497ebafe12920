import { performance } from 'node:perf_hooks';
import type { ServiceClient } from '@agentroom/kit/grpc';
import type { Logger } from '@agentroom/kit/log';
import { liveFanoutDuration } from '@agentroom/kit/metrics';
import { type DomainError, unavailable as unavailableProblem } from '@agentroom/kit/problems';
import { compareStreamIds } from '@agentroom/kit/store';
import { inLinkedSpanSync, SpanKind } from '@agentroom/kit/telemetry';
import type { Post, PostList } from '@agentroom/api';
import { toRemoved, tombstonePost } from '@agentroom/api/wire';
import type { RoomServiceClient } from '@agentroom/proto';
import { type UpstreamWatch, upstreamWatch } from '../gateways/upstream.js';
import { type PagedPost, pagedPost, type WindowExtension } from '../operations/table.js';
import { FIRST_PAGE_CAPACITY, FirstPage, windowFor } from './first-page.js';

type Deliver = (post: Post) => void;

/** A removal the room told: the live feed's `post_removed` event (docs/decisions.md §42). */
export interface LiveRemoval {
  id: string;
  removed: NonNullable<Post['removed']>;
}

type DeliverRemoval = (removal: LiveRemoval) => void;

/** What the room's WatchPosts brings: a post, or a removal. */
/** A post streamed with the traceparent of the call that made it ('' without tracing), or a removal. */
type Watched = { entry: PagedPost; traceparent: string; removal?: undefined } | { removal: LiveRemoval; entry?: undefined };

const RECONNECT_MIN_MS = 250;
const RECONNECT_MAX_MS = 5_000;

/**
 * The posts feed of one edge process: ONE WatchPosts stream from the room service, fanned out to
 * every subscriber here, so ten thousand watchers cost the room one stream. It keeps the latest
 * posts so a subscriber resuming with a recent `Last-Event-ID` is served from memory; an older
 * one gets a watch of its own, resumed by the room service from storage.
 *
 * Nothing missed, nothing twice: the hub's stream is gap-free (after a drop it resumes after the
 * last post it saw), and a subscriber is added in the same tick its replay is taken from the buffer.
 *
 * The same stream keeps the room's newest posts in memory (`newestPage`, `pageAfter`, first-page.ts):
 * each time it connects, the hub reads the newest posts with their cursors, then adds every streamed
 * post, and listPosts adds the room's answers to pages read further back. The first read of the first
 * page starts the hub, and from then on it stays live whether or not anyone subscribes, reconnecting
 * with backoff; while its stream is down the window is empty and reads go to the room.
 */
export class PostsHub {
  private readonly listeners = new Set<Deliver>();
  private readonly removalListeners = new Set<DeliverRemoval>();
  /** The latest posts, oldest first, contiguous: every post after `bufferFrom` is in here. */
  private readonly buffer: Post[] = [];
  private bufferFrom: string | undefined;
  /** The hub has seen every post up to here (the last post, or where it started). */
  private position: string | undefined;
  private watch: UpstreamWatch<Watched> | undefined;
  private connecting: Promise<void> | undefined;
  private live = false;
  private closed = false;
  /** Set by the first read of the first page: the stream then stays up without subscribers. */
  private keptLive = false;
  private readonly firstPage: FirstPage;
  private retryMs = RECONNECT_MIN_MS;
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly room: ServiceClient<RoomServiceClient>,
    private readonly log: Logger,
    private readonly capacity = 1_000,
    /** The room's POSTS_RETENTION (0: it keeps every post): edge keeps at most half as many for listPosts (first-page.ts, `windowFor`). */
    retention = 0,
  ) {
    this.firstPage = new FirstPage(windowFor(retention), retention);
  }

  /**
   * Delivers every post after `afterId` (or from now on), then live ones, until the returned
   * function is called. Resolves once delivery is assured; throws `unavailable` if the room
   * service cannot be reached. `fail` is called if delivery can no longer be assured. `removed`
   * hears each post removed from then on (the posts replayed are already tombstones).
   */
  async subscribe(afterId: string | undefined, deliver: Deliver, fail: () => void, removed?: DeliverRemoval): Promise<() => void> {
    await this.ensureLive();
    if (afterId !== undefined && this.bufferFrom !== undefined && compareStreamIds(afterId, this.bufferFrom) < 0) {
      return this.ownWatch(afterId, deliver, fail, removed);
    }
    let listener = deliver;
    if (afterId !== undefined) {
      for (const post of this.buffer) if (compareStreamIds(post.id, afterId) > 0) deliver(post);
      // An id beyond what the hub has seen: skip up to it.
      if (this.position !== undefined && compareStreamIds(afterId, this.position) > 0) {
        listener = (post) => {
          if (compareStreamIds(post.id, afterId) > 0) deliver(post);
        };
      }
    }
    this.listeners.add(listener);
    if (removed) this.removalListeners.add(removed);
    return () => {
      this.listeners.delete(listener);
      if (removed) this.removalListeners.delete(removed);
    };
  }

  get subscribers(): number {
    return this.listeners.size;
  }

  /**
   * The room's first page of `limit` posts from memory, or `undefined` when the hub cannot vouch for
   * it now (not live yet, stream lost, catching up with a post of this edge): then ask the room.
   * The first call starts the hub, which from then on keeps its stream.
   */
  newestPage(limit: number): PostList | undefined {
    if (!this.keptLive) {
      this.keptLive = true;
      this.ensureLive().catch((error: unknown) => this.reconnectLater(error));
    }
    return this.firstPage.page(limit);
  }

  /** The page of `limit` posts after the post whose cursor is `cursor`, from memory, or `undefined` when only the room can answer it now. */
  pageAfter(cursor: string, limit: number): PostList | undefined {
    return this.firstPage.pageAfter(cursor, limit);
  }

  /** Whether the room's answer to the page after `cursor` would take the window further back (first-page.ts, `extendable`). */
  extendable(cursor: string): WindowExtension | undefined {
    return this.firstPage.extendable(cursor);
  }

  /** The room's answer to such a page, with each post's cursor: kept behind the oldest post held. */
  extend(extension: WindowExtension, answer: readonly PagedPost[], hasMore: boolean): void {
    this.firstPage.extend(extension, answer, hasMore);
  }

  /** The cursor the room signed for a post held in memory. */
  cursorOf(id: string): string | undefined {
    return this.firstPage.cursorOf(id);
  }

  /** A post this edge created: on this edge's first page at once. */
  created(entry: PagedPost): void {
    this.firstPage.created(entry);
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.retryTimer);
    this.watch?.cancel();
    this.listeners.clear();
    this.removalListeners.clear();
    this.firstPage.reset();
  }

  /** A subscriber further behind than the buffer reaches: its own watch, resumed from storage. */
  private async ownWatch(afterId: string, deliver: Deliver, fail: () => void, removed?: DeliverRemoval): Promise<() => void> {
    const watch = this.watchPosts(afterId, false);
    watch.onItem((item) => (item.entry ? deliver(item.entry.post) : removed?.(item.removal)));
    watch.onEnd((error) => {
      this.log.warn({ err: error }, 'a resumed posts watch ended; its subscriber will reconnect');
      fail();
    });
    await watch.positioned;
    return () => watch.cancel();
  }

  private ensureLive(): Promise<void> {
    if (this.closed) return Promise.reject(unavailable());
    if (this.live) return Promise.resolve();
    this.connecting ??= this.connect().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  /**
   * The room's posts after `afterId`, oldest first, and its removals from now on, for as long as the
   * watch lives; the posts' cursors are empty unless `withCursors`.
   */
  private watchPosts(afterId: string | undefined, withCursors: boolean): UpstreamWatch<Watched> {
    return upstreamWatch(this.room.watch('watchPosts', { afterId: afterId ?? '', withCursors }), (response): Watched | undefined => {
      if (response.post) return { entry: pagedPost(response.post), traceparent: response.post.traceparent };
      if (response.removed) return { removal: { id: response.removed.postId, ...toRemoved(response.removed) } };
      return undefined;
    });
  }

  private async connect(): Promise<void> {
    // The first page starts over from what the room holds now: after a drop, or a restarted room,
    // nothing the hub held before is trusted.
    this.firstPage.reset();
    const newest = await this.room.call('listPosts', { limit: FIRST_PAGE_CAPACITY, withCursors: true });
    const entries = newest.posts.map(pagedPost);
    if (this.position === undefined) {
      // First start: position at the newest post, so the buffer's coverage is exact from here.
      this.position = entries[0]?.post.id ?? '0-0';
      this.bufferFrom = this.position;
    }
    // Posts from the seed up to the stream's start are in both; the page keeps each once.
    this.firstPage.seed(entries, newest.hasMore);
    const watch = this.watchPosts(this.position, true);
    this.watch = watch;
    watch.onItem((item) => (item.entry ? this.receive(item.entry, item.traceparent) : this.removed(item.removal)));
    watch.onEnd((error) => this.dropped(watch, error));
    await watch.positioned;
    // The watch may have ended between its metadata and here: `dropped` took it for lost then (and
    // scheduled the retry). Live now, the hub would hold no stream and never reconnect.
    if (this.watch !== watch || this.closed) throw unavailableProblem('The room stream ended as it started; reconnecting.', 1);
    this.live = true;
    this.firstPage.positioned(this.position);
    this.retryMs = RECONNECT_MIN_MS;
    this.log.info({ position: this.position, subscribers: this.listeners.size }, 'posts hub is live');
  }

  private receive(entry: PagedPost, traceparent: string): void {
    const { post } = entry;
    if (this.position !== undefined && compareStreamIds(post.id, this.position) <= 0) return;
    this.position = post.id;
    this.firstPage.streamed(entry);
    this.buffer.push(post);
    if (this.buffer.length > this.capacity) this.bufferFrom = this.buffer.shift()?.id;
    if (this.listeners.size === 0) return;
    const fanOut = (): void => {
      const started = performance.now();
      for (const listener of this.listeners) listener(post);
      liveFanoutDuration.observe((performance.now() - started) / 1_000);
    };
    // A span only for a traced post: a child of the call that made it, linked to it (docs/decisions.md §49).
    if (traceparent === '') return fanOut();
    inLinkedSpanSync({ traceparent }, 'live fan-out', { kind: SpanKind.CONSUMER, attributes: fanOutAttributes(post.id, this.listeners.size) }, fanOut);
  }

  /** A post was removed: its tombstone takes its place in the window and the buffer, and subscribers hear of it. */
  private removed(removal: LiveRemoval): void {
    this.firstPage.removed(removal.id, removal.removed);
    const at = this.buffer.findIndex((post) => post.id === removal.id);
    const held = this.buffer[at];
    if (held) this.buffer[at] = tombstonePost(held, removal.removed);
    for (const listener of this.removalListeners) listener(removal);
  }

  /** The room stream broke (a room replica restarted): resume after the last post, with backoff. */
  private dropped(watch: UpstreamWatch<Watched>, error: Error): void {
    if (this.watch !== watch || this.closed) return;
    this.watch = undefined;
    this.live = false;
    // Posts made through other edges no longer reach this one: its first page would go stale.
    this.firstPage.reset();
    this.reconnectLater(error);
  }

  private reconnectLater(error: unknown): void {
    if (this.closed) return;
    // One retry at a time: a failed connect is reported both by its watch ending and by its promise.
    if (this.retryTimer !== undefined) return;
    if (this.listeners.size === 0) {
      // Nobody to keep gap-free for: the hub starts afresh, at the newest post.
      this.position = undefined;
      this.bufferFrom = undefined;
      this.buffer.length = 0;
      // Nor any first page to keep: the next subscriber, or read of the first page, starts it again.
      if (!this.keptLive) return;
    }
    this.log.warn({ err: error, retryInMs: this.retryMs }, 'posts hub lost the room stream; reconnecting (after the last post when subscribers wait)');
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.ensureLive().catch((reconnectError: unknown) => this.reconnectLater(reconnectError));
    }, this.retryMs);
    this.retryTimer.unref();
    this.retryMs = Math.min(this.retryMs * 2, RECONNECT_MAX_MS);
  }
}

/** The live fan-out's span attributes: the post, and how many streams it was written to. */
function fanOutAttributes(postId: string, subscribers: number): Record<string, string | number> {
  return {
    'messaging.operation.type': 'process',
    'messaging.operation.name': 'fan-out',
    'messaging.destination.name': 'posts',
    'messaging.message.id': postId,
    'agentroom.subscribers': subscribers,
  };
}

function unavailable(): DomainError {
  return unavailableProblem('The live feed is shutting down; reconnect.', 2);
}
