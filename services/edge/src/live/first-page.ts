import { LIMIT_MAX } from '@agentroom/kit/domain';
import { compareStreamIds } from '@agentroom/kit/store';
import type { Post, PostList } from '@agentroom/api';
import { tombstonePost } from '@agentroom/api/wire';
import type { PagedPost, WindowExtension } from '../operations/table.js';

/**
 * How many of the newest posts the hub reads from the room each time its stream (re)connects: the
 * largest page, so every first page can be answered at once. Whether older posts exist beyond them
 * (has_more of a full page) comes from the room's own answer, and is known from then on: the room
 * keeps at least twice the posts edge holds (`windowFor`), so once a post has been pushed out of the
 * window, older ones exist.
 */
export const FIRST_PAGE_CAPACITY = LIMIT_MAX;

/**
 * How many posts an edge keeps at most: the first page's, then older ones, read from the room as
 * readers page back (each a post object and its cursor, about 1 KB: 1,000 are about 1 MB).
 */
export const POSTS_WINDOW = 1_000;

/**
 * The window for a room that keeps its `retention` newest posts (POSTS_RETENTION; 0 keeps them all):
 * at most half of them, and never less than a first page. The room lets its oldest post go as it
 * appends a new one, before this edge's stream brings that one; with half the room's posts, the
 * oldest held here is still in the room while the stream is up to the other half behind.
 */
export function windowFor(retention: number): number {
  if (retention === 0) return POSTS_WINDOW;
  return Math.max(FIRST_PAGE_CAPACITY, Math.min(POSTS_WINDOW, Math.floor(retention / 2)));
}

/**
 * The newest posts of the room, in this edge's memory, so `GET /posts` (and MCP's room_read_posts)
 * is answered without a call to the room: its first page, and the pages after it by cursor, back to
 * the oldest post held. The posts hub fills it: a page of the newest posts when its WatchPosts
 * stream (re)connects, then every post of the stream; this edge's own creates go in at once as
 * well; and, as readers page back past the oldest post held, the room's answers to those pages
 * (`extend`), up to the window's capacity. No I/O here: the hub and listPosts decide when, this
 * class keeps the rules of what it may answer.
 *
 * It answers only pages it can vouch for, byte for byte what the room would answer at that moment
 * up to the stream's delay, and otherwise `undefined` (ask the room):
 * - nothing before the hub has (re)connected, and nothing while its stream is lost;
 * - nothing while one of this edge's own posts is newer than what the stream has delivered: another
 *   edge's post made a moment earlier may still be on its way, and a page showing the newer post
 *   without it would make a reader that stops at the newest id it has seen miss it for good. The
 *   room already holds the new post, so reading it there keeps "your post shows at once" true;
 * - a page whose `has_more` it cannot know (fewer posts held than asked, and older ones exist);
 * - a page after a cursor it does not hold (older than the window, or not one the room signed).
 *
 * Cursors are the room's: each post comes with the cursor the room signed for it (a post's cursor
 * resumes the list right after it, whatever the limit), so a page's `next_cursor` is its last post's,
 * and a cursor a reader sends back is found among the posts held by its exact text, with no secret
 * and no signature to check: edge never holds CURSOR_SECRET.
 * (docs/decisions.md §15, docs/architecture.md "The first page".)
 */
export class FirstPage {
  /** Oldest first, ids strictly increasing: every post between the first and the last is here. */
  private entries: PagedPost[] = [];
  /** The same entries by the cursor the room signed for each, to answer the page after it. */
  private readonly byCursor = new Map<string, PagedPost>();
  /**
   * The first pages answered since the last change, by limit: the same object until the posts change,
   * so REST writes the bytes it serialised for it before (http/answers.ts, sendJson). Never mutated.
   */
  private readonly pages = new Map<number, PostList>();
  /** The room holds no post older than those here. */
  private complete = false;
  private seeded = false;
  private live = false;
  /** Every post up to this id has come through the stream (or the page it started from). */
  private coveredTo: string | undefined;
  /** The newest post of the seed: the stream's copies of it and of older posts are already counted in it. */
  private seedTop: string | undefined;
  /** Bumped on every change, so an answer read from the room meanwhile is not added stale. */
  private version = 0;

  /**
   * `capacity`: how many posts it keeps at most (`windowFor`); `retention`: the room's POSTS_RETENTION
   * (0: it keeps every post), below which a full page cannot tell whether older posts are still there.
   */
  constructor(
    private readonly capacity = POSTS_WINDOW,
    private readonly retention = 0,
  ) {}

  /** Forget everything: the stream was lost or starts over. Reads go to the room until `live` again. */
  reset(): void {
    this.entries = [];
    this.byCursor.clear();
    this.changed();
    this.complete = false;
    this.seeded = false;
    this.live = false;
    this.coveredTo = undefined;
    this.seedTop = undefined;
  }

  /** The room's newest posts, newest first, as the hub read them before opening its stream; `hasMore` when older ones exist. */
  seed(newest: readonly PagedPost[], hasMore: boolean): void {
    // Set first: trimming to capacity (a seed larger than it) turns it off again.
    this.complete = !hasMore;
    this.changed();
    for (const entry of [...newest].reverse()) this.insert(entry, true);
    this.seeded = true;
    const top = newest[0]?.post.id;
    this.seedTop = top;
    if (top !== undefined) this.cover(top);
  }

  /** The stream is positioned: it has delivered, or will deliver, every post after `position`. */
  positioned(position: string): void {
    this.live = true;
    this.cover(position);
  }

  /** A post of the stream: posts come in id order, each once. */
  streamed(entry: PagedPost): void {
    // A stream resumed after the last post the hub saw repeats what the seed already read, reply
    // counts included: only what comes after the seed is new.
    const fresh = this.seedTop === undefined || compareStreamIds(entry.post.id, this.seedTop) > 0;
    if (fresh && this.insert(entry, true)) this.counted(entry.post);
    this.cover(entry.post.id);
  }

  /** A post this edge just created: listed at once; the stream brings it again and it is kept once. */
  created(entry: PagedPost): void {
    if (this.seeded && this.insert(entry, false)) this.counted(entry.post);
  }

  /** A post was removed: if held, its tombstone takes its place (docs/decisions.md §42). */
  removed(id: string, removed: NonNullable<Post['removed']>): void {
    const entry = this.entries[this.indexOf(id)];
    if (entry?.post.id !== id || entry.post.removed !== undefined) return;
    // A new object: pages already answered keep the one they had (they are never mutated).
    entry.post = tombstonePost(entry.post, removed);
    this.changed();
  }

  /** Whether the first page can be answered from here now. */
  get serving(): boolean {
    const newest = this.entries.at(-1)?.post.id;
    return this.seeded && this.live && (newest === undefined || (this.coveredTo !== undefined && compareStreamIds(this.coveredTo, newest) >= 0));
  }

  /** The first page of `limit` posts as the room would answer it, or `undefined` when only the room can say. */
  page(limit: number): PostList | undefined {
    if (!this.serving) return undefined;
    let page = this.pages.get(limit);
    if (page === undefined) {
      page = this.build(limit);
      if (page !== undefined) this.pages.set(limit, page);
    }
    return page;
  }

  /** The page of `limit` posts after the post whose cursor is `cursor`, as the room would answer it, or `undefined` when only the room can say. */
  pageAfter(cursor: string, limit: number): PostList | undefined {
    if (!this.serving) return undefined;
    const after = this.byCursor.get(cursor);
    if (after === undefined) return undefined;
    // Every post before it in the window is older, and the window has no gaps.
    const at = this.indexOf(after.post.id);
    if (at > limit) {
      // One more post older than the page is held: the room holds it too, so more exist.
      const last = this.entries[at - limit] as PagedPost;
      return last.cursor === '' ? undefined : { object: 'list', data: this.newestFirst(at - limit, at), has_more: true, next_cursor: last.cursor };
    }
    // The page reaches the window's oldest post: whole, and the last, only if the room holds none older.
    return this.complete ? { object: 'list', data: this.newestFirst(0, at), has_more: false, next_cursor: null } : undefined;
  }

  /**
   * When the room's answer to the page after `cursor` (a post held here) reaches past the window's
   * oldest post, and the window has room for more: what to hand back to `extend` with that answer
   * (read with each post's cursor). Otherwise `undefined`: the answer is only passed on.
   */
  extendable(cursor: string): WindowExtension | undefined {
    if (!this.serving || this.complete || this.entries.length >= this.capacity) return undefined;
    const after = this.byCursor.get(cursor);
    return after === undefined ? undefined : { version: this.version, overlap: this.indexOf(after.post.id) };
  }

  /**
   * The room's answer to the page after a post held here (newest first, each with its cursor;
   * `hasMore` as the room said): the posts older than the window's oldest are kept behind it, as far
   * as the window has room, unless anything changed since `extendable` (the answer could then be
   * stale: a reply counted on a post the window did not hold yet, a post pushed out).
   */
  extend(extension: WindowExtension, answer: readonly PagedPost[], hasMore: boolean): void {
    if (extension.version !== this.version || answer.length < extension.overlap) return;
    // The answer starts with the posts held between the cursor's post and the oldest: the same ones.
    for (let i = 0; i < extension.overlap; i += 1) {
      if (answer[i]?.post.id !== this.entries[extension.overlap - 1 - i]?.post.id) return;
    }
    const older = answer.slice(extension.overlap);
    if (older.length === 0) {
      // Nothing behind the window: the room holds nothing older when it says so.
      if (!hasMore && !this.complete) {
        this.complete = true;
        this.changed();
      }
      return;
    }
    const taken = older.slice(0, this.capacity - this.entries.length);
    let newer = this.entries[0];
    for (const entry of taken) {
      // Strictly older, one after the other, each with a cursor: anything else is not the room's sequence.
      if (entry.cursor === '' || (newer !== undefined && compareStreamIds(entry.post.id, newer.post.id) >= 0)) return;
      newer = entry;
    }
    const kept = taken.map((entry) => ({ ...entry })).reverse();
    for (const entry of kept) this.byCursor.set(entry.cursor, entry);
    this.entries.unshift(...kept);
    this.complete = !hasMore && taken.length === older.length;
    this.changed();
  }

  /** The cursor the room signed for the post with `id`, when it is held here. */
  cursorOf(id: string): string | undefined {
    const entry = this.entries[this.indexOf(id)];
    return entry?.post.id === id && entry.cursor !== '' ? entry.cursor : undefined;
  }

  /** How many posts are held (tests, and the hub's log). */
  get size(): number {
    return this.entries.length;
  }

  private build(limit: number): PostList | undefined {
    const held = this.entries.length;
    if (held < limit) {
      // Fewer posts than asked: a whole page only if the room has no others.
      return this.complete ? { object: 'list', data: this.newestFirst(0, held), has_more: false, next_cursor: null } : undefined;
    }
    if (held === limit && this.complete) return { object: 'list', data: this.newestFirst(0, held), has_more: false, next_cursor: null };
    // A room that keeps no more posts than the page holds may have let every older one go.
    if (held === limit && this.retention !== 0 && this.retention <= limit) return undefined;
    // The page ends with the limit-th newest post; its cursor resumes right after it.
    const cursor = (this.entries[held - limit] as PagedPost).cursor;
    // A room that signs no cursors (older than this edge) leaves the paging to itself.
    if (cursor === '') return undefined;
    return { object: 'list', data: this.newestFirst(held - limit, held), has_more: true, next_cursor: cursor };
  }

  /** The posts of entries `from` to `to` (excluded), newest first. */
  private newestFirst(from: number, to: number): Post[] {
    const posts: Post[] = [];
    for (let i = to - 1; i >= from; i -= 1) posts.push((this.entries[i] as PagedPost).post);
    return posts;
  }

  /** Where the post with `id` is in the window, or where it would go (ids are in order). */
  private indexOf(id: string): number {
    let low = 0;
    let high = this.entries.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (compareStreamIds((this.entries[middle] as PagedPost).post.id, id) < 0) low = middle + 1;
      else high = middle;
    }
    return low;
  }

  /** A new reply: the post that starts its thread, if held, counts one more (the room's count, as it reads it now). */
  private counted(post: Post): void {
    if (post.threadId === undefined) return;
    const root = this.entries[this.indexOf(post.threadId)];
    if (root?.post.id !== post.threadId) return;
    // A new object: pages already answered keep the one they had (they are never mutated).
    root.post = { ...root.post, replyCount: (root.post.replyCount ?? 0) + 1 };
    this.changed();
  }

  private cover(id: string): void {
    if (this.coveredTo === undefined || compareStreamIds(id, this.coveredTo) > 0) this.coveredTo = id;
  }

  /** Puts a post in id order, once; `contiguous` when it comes from the room's own sequence (seed, stream). True when it was new here. */
  private insert(entry: PagedPost, contiguous: boolean): boolean {
    const { id } = entry.post;
    // Most posts are the newest: search from the end.
    let at = this.entries.length;
    while (at > 0) {
      const cmp = compareStreamIds((this.entries[at - 1] as PagedPost).post.id, id);
      if (cmp === 0) return false;
      if (cmp < 0) break;
      at -= 1;
    }
    // Older than everything held, while older posts exist in the room: it would leave a gap.
    if (at === 0 && this.entries.length > 0 && !this.complete && !contiguous) return false;
    const kept = { ...entry };
    this.entries.splice(at, 0, kept);
    if (kept.cursor !== '') this.byCursor.set(kept.cursor, kept);
    this.changed();
    while (this.entries.length > this.capacity) {
      const gone = this.entries.shift();
      if (gone !== undefined) this.byCursor.delete(gone.cursor);
      this.complete = false;
    }
    return true;
  }

  /** The posts (or whether older ones exist) changed: pages are built again. */
  private changed(): void {
    this.version += 1;
    this.pages.clear();
  }
}
