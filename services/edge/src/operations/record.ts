import type { ServiceClient } from '@agentroom/kit/grpc';
import { DomainError, unavailable } from '@agentroom/kit/problems';
import { compareStreamIds } from '@agentroom/kit/store';
import type { PostList } from '@agentroom/api';
import { pageOf, toPost } from '@agentroom/api/wire';
import type { RecordServiceClient } from '@agentroom/proto';

/** What edge asks of the record service: every post the room acknowledged, and search (docs/decisions.md §35). */
export type RecordClient = Pick<ServiceClient<RecordServiceClient>, 'call'>;

/** How long a client waits before asking again for what only the record holds. */
const RECORD_RETRY_AFTER_SECONDS = 5;

/** The record did not answer: what only it holds is refused for now, and the answer says what still works. */
export function recordUnavailable(): DomainError {
  return unavailable(
    "The record of the room's history did not answer: search, and posts older than the room keeps, are unavailable for now; the room's newest posts and writing still work.",
    RECORD_RETRY_AFTER_SECONDS,
  );
}

function isUnavailable(error: unknown): boolean {
  return error instanceof DomainError && error.slug === 'unavailable';
}

/** A call to the record: its other failures as they are, its unavailability as `recordUnavailable`. */
export async function fromRecord<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    throw isUnavailable(error) ? recordUnavailable() : error;
  }
}

/** How long calls fail at once after the record was found unreachable, before one tries it again. */
export const RECORD_DOWN_HOLD_MS = 1_000;

/**
 * The record's client, failing at once for a moment after the record was found unreachable: a call
 * to a peer that is gone takes grpc-js's retries (some 650 ms here) to fail, and a small room's every
 * first page would otherwise pay it while the record is down. One call a second tries it again.
 */
export function heldWhenDown(client: RecordClient, holdMs = RECORD_DOWN_HOLD_MS): RecordClient {
  let downUntil = 0;
  return {
    call(method, request) {
      if (Date.now() < downUntil) return Promise.reject(recordUnavailable());
      return client.call(method, request).catch((error: unknown) => {
        if (isUnavailable(error)) downUntil = Date.now() + holdMs;
        throw error;
      });
    },
  };
}

/** Whether a failure of the room says it holds no such post (it may have let it go: the record may hold it). */
export function isPostNotFound(error: unknown): boolean {
  return error instanceof DomainError && error.slug === 'post-not-found';
}

/**
 * What edge has learnt of the record's oldest posts: once the record said it holds nothing older
 * than a post it holds itself, nothing older can ever come (it keeps posts in the room's order, and
 * retention only drops the oldest), so a page ending at or before that post needs no question.
 */
export class RecordFloor {
  /** No post older than this one is in the record; undefined until the record said so. */
  private nothingBefore: string | undefined;

  /** Whether the record surely holds no post older than `id`. */
  covers(id: string): boolean {
    return this.nothingBefore !== undefined && compareStreamIds(id, this.nothingBefore) <= 0;
  }

  /** The record holds `id` and no post older than it. */
  learn(id: string): void {
    if (this.nothingBefore === undefined || compareStreamIds(id, this.nothingBefore) > 0) this.nothingBefore = id;
  }
}

/** What `pastWindow` knows of the request whose page the room (or the posts hub) answered. */
export interface PageRequest {
  limit: number;
  /** The cursor the client sent; undefined for the first page. */
  cursor: string | undefined;
  /**
   * The cursor the room signs for the page's last post: asked only when the record is down, so that
   * a page of the room's own posts still answers, its next page being the one that waits.
   */
  cursorOfLast(): Promise<string>;
}

/**
 * listPosts' page as the client sees it, whichever store holds its posts: a page that says more
 * exist is answered as it is (the hot path); otherwise it is continued into the record (docs/decisions.md §35).
 */
export async function pastWindow(record: RecordClient, page: PostList, request: PageRequest, floor = new RecordFloor()): Promise<PostList> {
  if (page.has_more) return page;
  const { limit, cursor } = request;
  const { data } = page;
  const last = data.at(-1);
  if (last === undefined) {
    try {
      const older = await fromRecord(() => record.call('listArchivedPosts', { limit, cursor }));
      return pageOf(older.posts.map(toPost), older);
    } catch (error) {
      // An empty room (it restarted in memory, say) still answers its first page while the record is down.
      if (cursor === undefined && isUnavailable(error)) return page;
      throw error;
    }
  }
  // A page that ends at a post the record holds nothing older than is whole as it is.
  if (floor.covers(last.id)) return page;
  try {
    if (data.length < limit) {
      const older = await fromRecord(() => record.call('listArchivedPosts', { limit: limit - data.length, beforeId: last.id }));
      const oldest = older.posts.at(-1)?.id;
      if (oldest !== undefined && !older.hasMore) floor.learn(oldest);
      return { object: 'list', data: [...data, ...older.posts.map(toPost)], has_more: older.hasMore, next_cursor: older.nextCursor || null };
    }
    // The record's one post before the page's last but one is its last: whether older exist, and the cursor after it.
    const newer = data.at(-2);
    const probe = await fromRecord(() => record.call('listArchivedPosts', newer === undefined ? { limit: 1, cursor } : { limit: 1, beforeId: newer.id }));
    if (probe.posts[0]?.id !== last.id) return page;
    if (probe.hasMore && probe.nextCursor !== '') return { ...page, has_more: true, next_cursor: probe.nextCursor };
    // The record holds the page's last post and nothing older: the room's last page stays the last (docs/decisions.md §35).
    floor.learn(last.id);
    return page;
  } catch (error) {
    if (!isUnavailable(error)) throw error;
    // The room's own posts still answer; the page after them is the one that answers 503 until the record is back.
    const next = await request.cursorOfLast();
    return next === '' ? page : { ...page, has_more: true, next_cursor: next };
  }
}
