/** Anything stored in a Redis-stream-like log: ids are `<ms>-<seq>` and grow monotonically. */
export interface FeedItem {
  id: string;
}

export const STREAM_ID = /^\d{1,16}-\d{1,10}$/;

/** Orders stream ids the way Redis does: by time, then by sequence. */
export function compareStreamIds(a: string, b: string): number {
  const [aMs = '0', aSeq = '0'] = a.split('-');
  const [bMs = '0', bSeq = '0'] = b.split('-');
  return aMs.length !== bMs.length ? aMs.length - bMs.length : aMs !== bMs ? (aMs < bMs ? -1 : 1) : Number(aSeq) - Number(bSeq);
}

/**
 * Ids made as Redis makes stream ids (`<ms>-<seq>`, strictly increasing even when the clock stands
 * still), for the in-memory stores: their feed positions and cursors read the same as Redis's.
 */
export class StreamIds {
  private lastMs = 0;
  private lastSeq = 0;

  constructor(private readonly now: () => number) {}

  next(): string {
    const ms = this.now();
    if (ms > this.lastMs) {
      this.lastMs = ms;
      this.lastSeq = 0;
    } else {
      this.lastSeq += 1;
    }
    return `${this.lastMs}-${this.lastSeq}`;
  }
}

/** A log that can be read after a position and followed live. */
export interface FeedSource<T extends FeedItem> {
  /** Items with an id greater than `afterId`, oldest first, at most `count`. */
  readAfter(afterId: string, count: number): Promise<T[]>;
  /**
   * Calls `listener` for each item appended from now on, in order. Resolves, with the unsubscribe,
   * once the position is fixed: every later item reaches the listener.
   */
  subscribe(listener: (item: T) => void): Promise<() => void>;
}

const REPLAY_PAGE = 200;

export interface FollowOptions {
  /**
   * Called once the position is fixed (subscribed, replay done): from then on every appended item
   * is delivered. gRPC watch handlers send their initial metadata here, so a watcher knows when a
   * write it makes next is sure to reach it.
   */
  onPositioned?: () => void;
  /**
   * For a watcher that may be slower than the feed: `deliver` answers false once the watcher holds
   * enough items it has not taken yet (a gRPC stream's `write`), and this resolves when it has room
   * again. Meanwhile nothing is queued for it: the feed leaves new items in the source and, once
   * there is room, reads them from there after the last one delivered. So a watcher that falls
   * behind costs a position, not a copy of every item since (docs/decisions.md §19).
   */
  drained?: () => Promise<void>;
}

/**
 * Follows a feed from just after `afterId` (or from now on), with nothing missed and nothing twice:
 * it listens before it replays, holds live items back while the replay runs, then drops any it
 * already replayed. With `options.drained`, a watcher without room is caught up the same way once it
 * has room again. Resolves when `signal` aborts.
 */
export async function followFeed<T extends FeedItem>(
  source: FeedSource<T>,
  afterId: string | undefined,
  deliver: (item: T) => unknown,
  signal: AbortSignal,
  options: FollowOptions = {},
): Promise<void> {
  if (signal.aborted) return;
  const { drained } = options;
  let last = afterId;
  // Live items that arrive while the source is read: delivered after what it answers.
  let held: T[] | undefined = afterId === undefined ? undefined : [];
  // The watcher has no room: items are left in the source until it has.
  let full = false;
  // What the last page read held past the item that filled the watcher: delivered first once it has
  // room, so a watcher filled a few items into each page does not have the source read again for it
  // (at most one page is kept; docs/decisions.md §38).
  let rest: T[] = [];
  let wake: (() => void) | undefined;
  const emit = (item: T): void => {
    if (full) return;
    if (last !== undefined && compareStreamIds(item.id, last) <= 0) return;
    last = item.id;
    if (deliver(item) === false && drained !== undefined) {
      full = true;
      wake?.();
    }
  };
  /** Emits the items of `page` in order until the watcher is full; keeps those left over in `rest`. */
  const deliverPage = (page: T[]): void => {
    for (let index = 0; index < page.length; index += 1) {
      if (full) {
        rest = page.slice(index);
        return;
      }
      emit(page[index] as T);
    }
  };
  /** Delivers what the source holds after `last`, then the live items held meanwhile; stops early when the watcher is full. */
  const catchUp = async (): Promise<void> => {
    const kept = rest;
    rest = [];
    deliverPage(kept);
    while (!signal.aborted && !full) {
      const page = await source.readAfter(last ?? '0-0', REPLAY_PAGE);
      deliverPage(page);
      if (page.length < REPLAY_PAGE) break;
    }
    const pending = held ?? [];
    held = undefined;
    for (const item of pending) emit(item);
  };
  const aborted = new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
  const unsubscribe = await source.subscribe((item) => (held ? held.push(item) : emit(item)));
  try {
    if (held) await catchUp();
    if (signal.aborted) return;
    options.onPositioned?.();
    while (!signal.aborted) {
      if (!full) {
        const woken = new Promise<void>((resolve) => {
          wake = resolve;
        });
        await Promise.race([aborted, woken]);
        wake = undefined;
      }
      if (signal.aborted || drained === undefined) return;
      await Promise.race([aborted, drained()]);
      if (signal.aborted) return;
      full = false;
      held = [];
      await catchUp();
    }
  } finally {
    unsubscribe();
  }
}

/**
 * Lua: `compareIds(a, b)`, stream ids compared as Redis orders them and as {@link compareStreamIds}
 * does (by time, then sequence, as decimal strings: a 16-digit time does not fit a Lua number
 * exactly); -1, 0 or 1. For scripts that keep a position in a stream.
 */
export const COMPARE_STREAM_IDS_LUA = `
local function decimal(a, b)
  if #a ~= #b then return #a < #b and -1 or 1 end
  if a ~= b then return a < b and -1 or 1 end
  return 0
end
local function compareIds(a, b)
  local aMs, aSeq = string.match(a, '^(%d+)-(%d+)$')
  local bMs, bSeq = string.match(b, '^(%d+)-(%d+)$')
  local byTime = decimal(aMs, bMs)
  if byTime ~= 0 then return byTime end
  return decimal(aSeq, bSeq)
end
`;
