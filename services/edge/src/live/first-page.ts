import { compareStreamIds, LIMIT_MAX } from '@agentroom/kit';
import type { Post, PostList } from '@agentroom/api';
import type { PagedPost } from '../gateways/room.gateway.js';

/**
 * How many posts the first page keeps: the largest page. Whether older posts exist beyond them
 * (has_more of a full page) comes from the room's own answer when the hub reads them, and is
 * known from then on: the room keeps every post, so once one has been pushed out, older ones exist.
 */
export const FIRST_PAGE_CAPACITY = LIMIT_MAX;

/**
 * The newest posts of the room, in this edge's memory, so the first page of `GET /posts` (and MCP's
 * room_read_posts without a cursor) is answered without a call to the room. The posts hub fills it:
 * a page of the newest posts when its WatchPosts stream (re)connects, then every post of the stream;
 * this edge's own creates go in at once as well. No I/O here: the hub decides when, this class keeps
 * the rules of what it may answer.
 *
 * It answers only pages it can vouch for, byte for byte what the room would answer at that moment
 * up to the stream's delay, and otherwise `undefined` (ask the room):
 * - nothing before the hub has (re)connected, and nothing while its stream is lost;
 * - nothing while one of this edge's own posts is newer than what the stream has delivered: another
 *   edge's post made a moment earlier may still be on its way, and a page showing the newer post
 *   without it would make a reader that stops at the newest id it has seen miss it for good. The
 *   room already holds the new post, so reading it there keeps "your post shows at once" true;
 * - a page whose `has_more` it cannot know (fewer posts held than asked, and older ones exist).
 *
 * `next_cursor` is the room's: the cursor the room signed for the page's last post (a post's cursor
 * resumes the list right after it, whatever the limit), so edge never holds CURSOR_SECRET.
 * (docs/decisions.md §15, docs/architecture.md "The first page".)
 */
export class FirstPage {
  /** Oldest first, ids strictly increasing: every post between the first and the last is here. */
  private entries: PagedPost[] = [];
  /** The same posts newest first, built again after a change: a page is then one `slice`. */
  private newestFirst: Post[] | undefined;
  /**
   * The pages answered since the last change, by limit: the same object until the posts change, so
   * REST writes the bytes it serialised for it before (rest/routes.ts, sendJson). Never mutated.
   */
  private readonly pages = new Map<number, PostList>();
  /** The room holds no post older than those here. */
  private complete = false;
  private seeded = false;
  private live = false;
  /** Every post up to this id has come through the stream (or the page it started from). */
  private coveredTo: string | undefined;

  constructor(private readonly capacity = FIRST_PAGE_CAPACITY) {}

  /** Forget everything: the stream was lost or starts over. Reads go to the room until `live` again. */
  reset(): void {
    this.entries = [];
    this.changed();
    this.complete = false;
    this.seeded = false;
    this.live = false;
    this.coveredTo = undefined;
  }

  /** The room's newest posts, newest first, as the hub read them before opening its stream; `hasMore` when older ones exist. */
  seed(newest: readonly PagedPost[], hasMore: boolean): void {
    // Set first: trimming to capacity (a seed larger than it) turns it off again.
    this.complete = !hasMore;
    this.changed();
    for (const entry of [...newest].reverse()) this.insert(entry, true);
    this.seeded = true;
    const top = newest[0]?.post.id;
    if (top !== undefined) this.cover(top);
  }

  /** The stream is positioned: it has delivered, or will deliver, every post after `position`. */
  positioned(position: string): void {
    this.live = true;
    this.cover(position);
  }

  /** A post of the stream: posts come in id order, each once. */
  streamed(entry: PagedPost): void {
    if (this.insert(entry, true)) this.counted(entry.post);
    this.cover(entry.post.id);
  }

  /** A post this edge just created: listed at once; the stream brings it again and it is kept once. */
  created(entry: PagedPost): void {
    if (this.seeded && this.insert(entry, false)) this.counted(entry.post);
  }

  /** A new reply: the post that starts its thread, if held, counts one more (the room's count, as it reads it now). */
  private counted(post: Post): void {
    if (post.threadId === undefined) return;
    const root = this.entries.find((entry) => entry.post.id === post.threadId);
    if (!root) return;
    // A new object: pages already answered keep the one they had (they are never mutated).
    root.post = { ...root.post, replyCount: (root.post.replyCount ?? 0) + 1 };
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

  private build(limit: number): PostList | undefined {
    const held = this.entries.length;
    if (held < limit) {
      // Fewer posts than asked: a whole page only if the room has no others.
      return this.complete ? { object: 'list', data: this.newest().slice(), has_more: false, next_cursor: null } : undefined;
    }
    if (held === limit && this.complete) return { object: 'list', data: this.newest().slice(), has_more: false, next_cursor: null };
    // The page ends with the limit-th newest post; its cursor resumes right after it.
    const cursor = (this.entries[held - limit] as PagedPost).cursor;
    // A room that signs no cursors (older than this edge) leaves the paging to itself.
    if (cursor === '') return undefined;
    return { object: 'list', data: this.newest().slice(0, limit), has_more: true, next_cursor: cursor };
  }

  private newest(): Post[] {
    this.newestFirst ??= this.entries.map((entry) => entry.post).reverse();
    return this.newestFirst;
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
    this.entries.splice(at, 0, { ...entry });
    this.changed();
    while (this.entries.length > this.capacity) {
      this.entries.shift();
      this.complete = false;
    }
    return true;
  }

  /** The posts (or whether older ones exist) changed: pages are built again. */
  private changed(): void {
    this.newestFirst = undefined;
    this.pages.clear();
  }
}
