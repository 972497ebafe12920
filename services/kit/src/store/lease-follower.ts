import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { ClientReadableStream } from '@grpc/grpc-js';
import { fromServiceError } from '../grpc/status.js';
import type { Logger } from '../log.js';
import { pauseUnlessAborted as sleep } from '../lifecycle.js';

/**
 * Where a {@link LeasedFollower} keeps its state: one lease (who follows now) and one position (the
 * id of the last item handled). Each store of a service that follows a feed implements it, in one
 * slot (a Lua script checks the lease and moves the position in one step).
 */
export interface LeaseStore {
  /**
   * Takes the lease for `owner` for `ttlMs`, or extends it when `owner` holds it already; false
   * while another owner holds it. A lease not extended in time lapses, and any owner may take it then.
   */
  acquireLease(owner: string, ttlMs: number): Promise<boolean>;
  /** Gives the lease up, when `owner` holds it, so another replica takes over at once. */
  releaseLease(owner: string): Promise<void>;
  /** The id of the last item handled; undefined before following ever started. */
  position(): Promise<string | undefined>;
  /** Stores `id` as the position, only while `owner` holds the lease (else false, nothing changes); never backwards. */
  advancePosition(owner: string, id: string): Promise<boolean>;
}

/** What every {@link FollowedFeed} says: where it is, and how its items are told apart. */
interface FollowedSource<R, T> {
  /**
   * Words for its log lines: who follows (`the notifier`), what (`the room`), what one item is
   * (`post`), and where `newest()` puts a new deployment (`from its newest post` unless told).
   */
  words: { follower: string; source: string; item: string; startsFrom?: string };
  /** Where a new deployment starts (no position stored yet): the feed's newest id, so only what comes next is handled, or an id before it. */
  newest(): Promise<string>;
  /** A watch after `after`; initial metadata says it is positioned. */
  watch(after: string): ClientReadableStream<R>;
  /** The item a response carries; undefined for one that carries none (a heartbeat): skipped. */
  itemOf(response: R): T | undefined;
  idOf(item: T): string;
}

/**
 * The feed a {@link LeasedFollower} follows: a gRPC server stream, resumable after an id. Its items
 * are handled one at a time (`handle`), or in batches (`handleBatch`): every item received and not
 * yet handled, in order, up to `maxBatch`; a batch is never waited for, so an item alone is handled
 * at once, and a backlog costs a step per batch rather than per item. A store that can keep a batch
 * and the position in one transaction takes both at once (`handleBatchAndAdvance`).
 */
export type FollowedFeed<R, T> = FollowedSource<R, T> &
  (
    | {
        /** Handles one item durably; throws when it could not (the item is then handed over again). */
        handle(item: T): Promise<void>;
        handleBatch?: never;
        handleBatchAndAdvance?: never;
      }
    | {
        /** Handles these items durably, in order; throws when it could not (they are all handed over again, those handled included). */
        handleBatch(items: T[]): Promise<void>;
        /** The most items in one batch; POSITION_EVERY (64) by default. */
        maxBatch?: number;
        handle?: never;
        handleBatchAndAdvance?: never;
      }
    | {
        /**
         * Handles these items durably, in order, and in the same step stores the last one's id as the
         * position, as {@link LeaseStore.advancePosition} would (only while `owner` holds the lease,
         * never backwards); answers whether it held the lease. One step a batch rather than two. Throws
         * when it could not (the items are all handed over again).
         */
        handleBatchAndAdvance(owner: string, items: T[]): Promise<boolean>;
        /** The most items in one batch; POSITION_EVERY (64) by default. Items received wait up to this many before the watch is paused. */
        maxBatch?: number;
        handle?: never;
        handleBatch?: never;
      }
  );

export interface LeasedFollowerOptions {
  /** How long the lease lasts unless its holder renews it (ms). */
  leaseMs?: number;
  /** How often the holder renews the lease, and another replica tries to take it (ms); a third of the lease by default. */
  renewMs?: number;
  /** The first wait after a failure (the source or storage unreachable, the watch ended), doubled up to `maxRetryMs`. */
  retryMs?: number;
  maxRetryMs?: number;
  /** Who holds the lease: unique per process. */
  owner?: string;
}

export const FOLLOWER_LEASE_MS = 10_000;

/** Above this many items waiting, the watch is paused (gRPC flow control holds the source back); resumed below LOW_WATER. */
const HIGH_WATER = 256;
const LOW_WATER = 32;
/**
 * The position is stored once no item waits, or after this many: a backlog costs one round trip
 * per item, not two. A crash then hands at most this many items over again.
 */
const POSITION_EVERY = 64;

/**
 * Follows a feed from a stored position under a lease: several replicas may run one each, and only
 * the holder of the store's lease follows, renewing it every `renewMs`; another takes over once it
 * lapses, or at once when its holder stops. Each item (or batch of them) is handled, then the
 * position moves on (only while the lease is held): a restart, a broken stream or a takeover
 * resumes after the stored position, so no item is missed, and an item is handed over again only
 * when a crash came between its handling and the position's move (handlers take repeats into
 * account).
 */
export class LeasedFollower<R, T> {
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
  /** Where it started from is said once, at its first lease. */
  private announced = false;

  constructor(
    private readonly store: LeaseStore,
    private readonly feed: FollowedFeed<R, T>,
    private readonly log: Logger,
    options: LeasedFollowerOptions = {},
  ) {
    this.owner = options.owner ?? `${hostname()}/${process.pid}/${randomBytes(4).toString('hex')}`;
    this.leaseMs = options.leaseMs ?? FOLLOWER_LEASE_MS;
    this.renewMs = options.renewMs ?? Math.floor(this.leaseMs / 3);
    this.retryMs = options.retryMs ?? 250;
    this.maxRetryMs = options.maxRetryMs ?? 5_000;
  }

  /** True while this replica holds the lease and its watch is positioned: every item from now on is handled. */
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
    if (this.holding) await this.store.releaseLease(this.owner).catch(() => undefined);
    this.holding = false;
  }

  /** Stops following at once and keeps the lease until it lapses, as a replica that died would (tests). */
  abandon(): void {
    this.holding = false;
    this.stopping.abort();
  }

  private async run(): Promise<void> {
    const stop = this.stopping.signal;
    const { follower, source, item } = this.feed.words;
    let failures = 0;
    while (!stop.aborted) {
      try {
        if (!(await this.store.acquireLease(this.owner, this.leaseMs))) {
          this.holding = false;
          await sleep(this.renewMs, stop);
          continue;
        }
        this.holding = true;
        if (await this.lead()) failures = 0;
      } catch (error) {
        if (failures === 0 && !stop.aborted) {
          this.log.warn(
            { err: error },
            `${follower} stopped following ${source} (${source} or storage unreachable); it resumes after the last ${item} it handled`,
          );
          this.troubled = true;
        }
        failures += 1;
      }
      // The watch ended, or failed: resume after the stored position, a moment later.
      await sleep(failures === 0 ? this.retryMs : Math.min(this.retryMs * 2 ** (failures - 1), this.maxRetryMs), stop);
    }
  }

  /** Follows while the lease is held; answers whether the watch got positioned (a healthy session). */
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
      this.store.acquireLease(this.owner, this.leaseMs).then(
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
      const { follower, source, item, startsFrom = `from its newest ${item}` } = this.feed.words;
      let position = await this.store.position();
      if (position === undefined) {
        // A new deployment: from now on, made durable at once, so items made while it restarts count.
        position = await this.feed.newest();
        if (!(await this.store.advancePosition(this.owner, position))) {
          lost();
          return false;
        }
        this.log.info({ after: position }, `${follower} starts: no position was stored, so it follows ${source} ${startsFrom}`);
      } else if (!this.announced) {
        this.log.info({ after: position }, `${follower} starts: it follows ${source} from where it left off, after ${item} ${position}`);
      }
      this.announced = true;
      return await this.follow(position, signal, lost);
    } finally {
      clearInterval(renew);
      this.following = false;
    }
  }

  /** The most items one step handles: one, or (batches) the batch's limit. */
  private batchLimit(): number {
    if (this.feed.handle !== undefined) return 1;
    return Math.max(1, this.feed.maxBatch ?? POSITION_EVERY);
  }

  /** The items to handle next, in order: one, or (batches) every one waiting, up to the batch's limit. */
  private takeNext(queue: T[]): T[] {
    return queue.splice(0, this.batchLimit());
  }

  /** Handles `items`; answers whether the position was stored with them (and then, whether the lease was held), or undefined when it is still to store. */
  private async handle(items: T[]): Promise<boolean | undefined> {
    if (this.feed.handleBatchAndAdvance !== undefined) return this.feed.handleBatchAndAdvance(this.owner, items);
    if (this.feed.handleBatch !== undefined) await this.feed.handleBatch(items);
    else for (const item of items) await this.feed.handle(item);
    return undefined;
  }

  /**
   * One watch from `after`: each item (or batch) handled in order, and the position stored after it
   * (once the items waiting are handled, or every POSITION_EVERY). Ends with the call, or `signal`.
   */
  private async follow(after: string, signal: AbortSignal, lost: () => void): Promise<boolean> {
    const { follower, source, item: itemWord } = this.feed.words;
    const call = this.feed.watch(after);
    const queue: T[] = [];
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
      if (this.troubled) this.log.info({ after }, `${follower} follows ${source} again`);
      else this.log.debug({ after }, `${follower} follows ${source}`);
      this.troubled = false;
      poke();
    });
    // While a batch is handled, the next one gathers, up to a whole batch: a backlog is handled a full batch a step.
    const highWater = Math.max(HIGH_WATER, this.batchLimit());
    call.on('data', (response: R) => {
      const item = this.feed.itemOf(response);
      if (item !== undefined) queue.push(item);
      if (queue.length >= highWater) call.pause();
      poke();
    });
    call.on('error', (error) => {
      ended ??= fromServiceError(error);
      poke();
    });
    call.on('end', () => {
      ended ??= new Error(`${source} ended the watch`);
      poke();
    });
    signal.addEventListener('abort', poke, { once: true });
    let handled: string | undefined;
    let unstored = 0;
    /** Stores the last item handled; false once the lease is someone else's. */
    const storePosition = async (): Promise<boolean> => {
      if (handled === undefined) return true;
      const stored = await this.store.advancePosition(this.owner, handled);
      handled = undefined;
      unstored = 0;
      if (!stored) lost();
      return stored;
    };
    try {
      for (;;) {
        if (signal.aborted) {
          // Stopping: what was handled is stored (best effort), so the next holder need not hand it over again.
          if (this.holding) await storePosition().catch(() => undefined);
          return positioned;
        }
        const items = this.takeNext(queue);
        const last = items.at(-1);
        if (last !== undefined) {
          if (queue.length <= LOW_WATER && call.isPaused()) call.resume();
          const held = await this.handle(items);
          if (held !== undefined) {
            // Stored with the items: nothing left to store.
            if (held) continue;
            lost();
            return positioned;
          }
          handled = this.feed.idOf(last);
          unstored += items.length;
          if ((queue.length === 0 || unstored >= POSITION_EVERY) && !(await storePosition())) return positioned;
          continue;
        }
        // Everything received is handled: a call that ended is done with.
        if (ended) {
          if (!signal.aborted) this.log.debug({ err: ended }, `the watch on ${source} ended; ${follower} resumes after the last ${itemWord} it handled`);
          return positioned;
        }
        await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      signal.removeEventListener('abort', poke);
      call.cancel();
    }
  }
}
