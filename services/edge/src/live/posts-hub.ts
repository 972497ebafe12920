import { performance } from 'node:perf_hooks';
import { compareStreamIds, type DomainError, liveFanoutDuration, type Logger, unavailable as unavailableProblem } from '@agentroom/kit';
import type { Post } from '@agentroom/api';
import type { RoomGateway } from '../gateways/room.gateway.js';
import type { UpstreamWatch } from '../gateways/upstream.js';

type Deliver = (post: Post) => void;

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
 */
export class PostsHub {
  private readonly listeners = new Set<Deliver>();
  /** The latest posts, oldest first, contiguous: every post after `bufferFrom` is in here. */
  private readonly buffer: Post[] = [];
  private bufferFrom: string | undefined;
  /** The hub has seen every post up to here (the last post, or where it started). */
  private position: string | undefined;
  private watch: UpstreamWatch<Post> | undefined;
  private connecting: Promise<void> | undefined;
  private live = false;
  private closed = false;
  private retryMs = RECONNECT_MIN_MS;
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly room: RoomGateway,
    private readonly log: Logger,
    private readonly capacity = 1_000,
  ) {}

  /**
   * Delivers every post after `afterId` (or from now on), then live ones, until the returned
   * function is called. Resolves once delivery is assured; throws `unavailable` if the room
   * service cannot be reached. `fail` is called if delivery can no longer be assured.
   */
  async subscribe(afterId: string | undefined, deliver: Deliver, fail: () => void): Promise<() => void> {
    await this.ensureLive();
    if (afterId !== undefined && this.bufferFrom !== undefined && compareStreamIds(afterId, this.bufferFrom) < 0) {
      return this.ownWatch(afterId, deliver, fail);
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
    return () => this.listeners.delete(listener);
  }

  get subscribers(): number {
    return this.listeners.size;
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.retryTimer);
    this.watch?.cancel();
    this.listeners.clear();
  }

  /** A subscriber further behind than the buffer reaches: its own watch, resumed from storage. */
  private async ownWatch(afterId: string, deliver: Deliver, fail: () => void): Promise<() => void> {
    const watch = this.room.watchPosts(afterId);
    watch.onItem(deliver);
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

  private async connect(): Promise<void> {
    if (this.position === undefined) {
      // First start: position at the newest post, so the buffer's coverage is exact from here.
      const newest = await this.room.listPosts(1, undefined);
      this.position = newest.posts[0]?.id ?? '0-0';
      this.bufferFrom = this.position;
    }
    const watch = this.room.watchPosts(this.position);
    this.watch = watch;
    watch.onItem((post) => this.receive(post));
    watch.onEnd((error) => this.dropped(watch, error));
    await watch.positioned;
    this.live = true;
    this.retryMs = RECONNECT_MIN_MS;
    this.log.info({ position: this.position, subscribers: this.listeners.size }, 'posts hub is live');
  }

  private receive(post: Post): void {
    if (this.position !== undefined && compareStreamIds(post.id, this.position) <= 0) return;
    this.position = post.id;
    this.buffer.push(post);
    if (this.buffer.length > this.capacity) this.bufferFrom = this.buffer.shift()?.id;
    if (this.listeners.size === 0) return;
    const started = performance.now();
    for (const listener of this.listeners) listener(post);
    liveFanoutDuration.observe((performance.now() - started) / 1_000);
  }

  /** The room stream broke (a room replica restarted): resume after the last post, with backoff. */
  private dropped(watch: UpstreamWatch<Post>, error: Error): void {
    if (this.watch !== watch || this.closed) return;
    this.watch = undefined;
    this.live = false;
    this.reconnectLater(error);
  }

  private reconnectLater(error: unknown): void {
    if (this.closed) return;
    if (this.listeners.size === 0) {
      // Nobody to keep gap-free for: the next subscriber starts the hub afresh.
      this.position = undefined;
      this.bufferFrom = undefined;
      this.buffer.length = 0;
      return;
    }
    this.log.warn({ err: error, retryInMs: this.retryMs }, 'posts hub lost the room stream; resuming after the last post');
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => {
      this.ensureLive().catch((reconnectError: unknown) => this.reconnectLater(reconnectError));
    }, this.retryMs);
    this.retryTimer.unref();
    this.retryMs = Math.min(this.retryMs * 2, RECONNECT_MAX_MS);
  }
}

function unavailable(): DomainError {
  return unavailableProblem('The live feed is shutting down; reconnect.', 2);
}
