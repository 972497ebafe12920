import { EventEmitter } from 'node:events';
import type { ClientReadableStream } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../src/log.js';
import { type FollowedFeed, LeasedFollower, type LeaseStore } from '../src/store/index.js';

const log = createLogger('test', 'silent');
const FAST = { leaseMs: 1_000, renewMs: 250, retryMs: 20, maxRetryMs: 50 };

/** A lease and a position in memory, as a service's store keeps them; `positions` records every move. */
function memoryLeases(): LeaseStore & { positions: string[] } {
  let holder: string | undefined;
  let position: string | undefined;
  const positions: string[] = [];
  return {
    positions,
    acquireLease: (owner) => {
      if (holder !== undefined && holder !== owner) return Promise.resolve(false);
      holder = owner;
      return Promise.resolve(true);
    },
    releaseLease: (owner) => {
      if (holder === owner) holder = undefined;
      return Promise.resolve();
    },
    position: () => Promise.resolve(position),
    advancePosition: (owner, id) => {
      if (holder !== owner) return Promise.resolve(false);
      if (position === undefined || Number(id) > Number(position)) {
        position = id;
        positions.push(id);
      }
      return Promise.resolve(true);
    },
  };
}

/** A server stream of numbered items, as grpc-js hands one over: positioned at once, then `send` writes items. */
class FakeWatch extends EventEmitter {
  paused = false;
  cancelled = false;
  pause(): this {
    this.paused = true;
    return this;
  }
  resume(): this {
    this.paused = false;
    return this;
  }
  isPaused(): boolean {
    return this.paused;
  }
  cancel(): void {
    this.cancelled = true;
  }
}

/** A feed whose items are ids '1', '2', …; each watch records where it started. */
function feed(
  handling:
    | { handle: (id: string) => Promise<void> }
    | { handleBatch: (ids: string[]) => Promise<void>; maxBatch?: number }
    | { handleBatchAndAdvance: (owner: string, ids: string[]) => Promise<boolean>; maxBatch?: number },
) {
  const watches: { after: string; call: FakeWatch }[] = [];
  const followed = {
    words: { follower: 'the test', source: 'the source', item: 'item' },
    newest: () => Promise.resolve('0'),
    watch: (after: string) => {
      const call = new FakeWatch();
      watches.push({ after, call });
      setImmediate(() => call.emit('metadata'));
      return call as unknown as ClientReadableStream<{ id: string }>;
    },
    itemOf: (response: { id: string }) => (response.id === '' ? undefined : response.id),
    idOf: (id: string) => id,
    ...handling,
  } as FollowedFeed<{ id: string }, string>;
  const send = (from: number, to: number): void => {
    const call = watches.at(-1)?.call;
    for (let id = from; id <= to; id += 1) call?.emit('data', { id: String(id) });
  };
  return { followed, watches, send };
}

describe('LeasedFollower', () => {
  it('hands items one at a time, in order, when the feed handles one at a time', async () => {
    const handled: string[] = [];
    const { followed, watches, send } = feed({ handle: (id) => Promise.resolve(void handled.push(id)) });
    const leases = memoryLeases();
    const follower = new LeasedFollower(leases, followed, log, FAST);
    follower.start();
    try {
      await expect.poll(() => follower.isFollowing).toBe(true);
      send(1, 100);
      await expect.poll(() => handled.length).toBe(100);
      expect(handled).toEqual(Array.from({ length: 100 }, (_, i) => String(i + 1)));
      await expect.poll(() => leases.positions.at(-1)).toBe('100');
      expect(watches).toHaveLength(1);
    } finally {
      await follower.stop();
    }
  });

  it('hands every item waiting as one batch, in order and at most maxBatch, and stores the position after the batches', async () => {
    const batches: string[][] = [];
    const { followed, send } = feed({ handleBatch: (ids) => Promise.resolve(void batches.push(ids)), maxBatch: 10 });
    const leases = memoryLeases();
    const follower = new LeasedFollower(leases, followed, log, FAST);
    follower.start();
    try {
      await expect.poll(() => follower.isFollowing).toBe(true);
      // One item alone is handed at once, not held for a batch to fill.
      send(1, 1);
      await expect.poll(() => batches).toEqual([['1']]);
      await expect.poll(() => leases.positions.at(-1)).toBe('1');
      // A burst arrives in one go: batches of at most 10, every item once, in order.
      send(2, 36);
      await expect.poll(() => batches.flat().length).toBe(36);
      expect(batches.flat()).toEqual(Array.from({ length: 36 }, (_, i) => String(i + 1)));
      expect(batches.slice(1).map((batch) => batch.length)).toEqual([10, 10, 10, 5]);
      await expect.poll(() => leases.positions.at(-1)).toBe('36');
    } finally {
      await follower.stop();
    }
  });

  it('lets a whole batch gather while one is handled: the watch is paused at maxBatch items waiting, not before', async () => {
    let release: () => void = () => undefined;
    const batches: string[][] = [];
    const { followed, watches, send } = feed({
      handleBatch: (ids) => {
        batches.push(ids);
        // The first batch takes its time, as a write to a busy database would.
        return batches.length === 1 ? new Promise<void>((resolve) => (release = resolve)) : Promise.resolve();
      },
      maxBatch: 1_000,
    });
    const follower = new LeasedFollower(memoryLeases(), followed, log, FAST);
    follower.start();
    try {
      await expect.poll(() => follower.isFollowing).toBe(true);
      send(1, 1);
      await expect.poll(() => batches.length).toBe(1);
      const call = watches[0]?.call;
      send(2, 601);
      expect(call?.paused).toBe(false);
      send(602, 1_001);
      expect(call?.paused).toBe(true);
      release();
      await expect.poll(() => batches.flat().length).toBe(1_001);
      expect(batches.slice(1).map((batch) => batch.length)).toEqual([1_000]);
      expect(call?.paused).toBe(false);
    } finally {
      await follower.stop();
    }
  });

  it('stores the position with each batch when the feed does (handleBatchAndAdvance), and stops following once the lease is someone else’s', async () => {
    const batches: string[][] = [];
    const leases = memoryLeases();
    let separateMoves = 0;
    // What the follower itself stores, apart from what the feed stores with its batches.
    const store: LeaseStore = {
      ...leases,
      advancePosition: (owner, id) => {
        separateMoves += 1;
        return leases.advancePosition(owner, id);
      },
    };
    const { followed, watches, send } = feed({
      handleBatchAndAdvance: (owner, ids) => {
        batches.push(ids);
        return leases.advancePosition(owner, ids.at(-1) ?? '');
      },
      maxBatch: 10,
    });
    const follower = new LeasedFollower(store, followed, log, FAST);
    follower.start();
    try {
      await expect.poll(() => follower.isFollowing).toBe(true);
      const before = separateMoves;
      send(1, 25);
      await expect.poll(() => batches.flat().length).toBe(25);
      expect(batches.flat()).toEqual(Array.from({ length: 25 }, (_, i) => String(i + 1)));
      await expect.poll(() => leases.positions.at(-1)).toBe('25');
      expect(separateMoves).toBe(before);
      // Another replica takes the lease: the next batch finds it gone, and the watch is given up.
      await leases.releaseLease(follower.owner);
      await leases.acquireLease('another', 60_000);
      send(26, 27);
      await expect.poll(() => watches[0]?.call.cancelled).toBe(true);
      expect(follower.isFollowing).toBe(false);
      expect(leases.positions.at(-1)).toBe('25');
    } finally {
      await follower.stop();
    }
  });

  it('says where it starts: its newest item, or the start the feed names, when no position is stored; where it left off when one is', async () => {
    const messages: string[] = [];
    const said = createLogger('test', 'info', { write: (line: string) => void messages.push((JSON.parse(line) as { msg: string }).msg) });
    const { followed } = feed({ handle: () => Promise.resolve() });
    const leases = memoryLeases();
    const fromStart = { ...followed, words: { ...followed.words, startsFrom: 'from the start of its stream' } } as typeof followed;
    const first = new LeasedFollower(leases, fromStart, said, FAST);
    first.start();
    await expect.poll(() => first.isFollowing).toBe(true);
    await first.stop();
    const second = new LeasedFollower(leases, followed, said, FAST);
    second.start();
    await expect.poll(() => second.isFollowing).toBe(true);
    await second.stop();
    expect(messages).toEqual([
      'the test starts: no position was stored, so it follows the source from the start of its stream',
      'the test starts: it follows the source from where it left off, after item 0',
    ]);
    const fresh = new LeasedFollower(memoryLeases(), followed, said, FAST);
    fresh.start();
    await expect.poll(() => fresh.isFollowing).toBe(true);
    await fresh.stop();
    expect(messages.at(-1)).toBe('the test starts: no position was stored, so it follows the source from its newest item');
  });

  it('hands a batch that failed over again, from the last position stored, on a new watch', async () => {
    const batches: string[][] = [];
    let failures = 1;
    const { followed, watches, send } = feed({
      handleBatch: (ids) => {
        batches.push(ids);
        if (ids.includes('7') && failures > 0) {
          failures -= 1;
          return Promise.reject(new Error('storage unreachable'));
        }
        return Promise.resolve();
      },
    });
    const leases = memoryLeases();
    const follower = new LeasedFollower(leases, followed, log, FAST);
    follower.start();
    try {
      await expect.poll(() => follower.isFollowing).toBe(true);
      send(1, 5);
      await expect.poll(() => leases.positions.at(-1)).toBe('5');
      send(6, 8);
      // The watch is given up, and another starts after the stored position: 6 to 8 again.
      await expect.poll(() => watches.length).toBe(2);
      expect(watches[0]?.call.cancelled).toBe(true);
      expect(watches[1]?.after).toBe('5');
      await expect.poll(() => follower.isFollowing).toBe(true);
      send(6, 8);
      await expect.poll(() => leases.positions.at(-1)).toBe('8');
      expect(batches.at(-1)).toEqual(['6', '7', '8']);
    } finally {
      await follower.stop();
    }
  });
});
