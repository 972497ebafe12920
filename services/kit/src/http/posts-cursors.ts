import { STREAM_ID } from '../store/feed.js';
import { CursorSigner, invalidCursor } from './paging.js';

/** The one list of posts, which every cursor of the room and of the record is bound to. */
const POSTS = { name: 'posts' } as const;

/**
 * The position of a replies cursor: the thread it pages (the id of its first post) and the reply it
 * resumes after. Never a stream id alone, so neither list of posts takes the other's cursors.
 */
const REPLIES_POSITION = /^thread (\d{1,16}-\d{1,10}) after (\d{1,16}-\d{1,10})$/;

/**
 * The cursors of the room's posts, as the room and the record both sign and read them, so that one
 * kind of cursor pages both: the newest-first list resumes after a post (its id), a thread's replies
 * after a reply of that thread. Signed with the deployment's CURSOR_SECRET for the posts list: one
 * thread's cursor does not page another, nor the replies' cursors the list.
 */
export class PostsCursors {
  readonly #signer: CursorSigner;

  constructor(secret: string) {
    this.#signer = new CursorSigner(secret);
  }

  /** The cursor that resumes the newest-first list after the post `postId`. */
  afterPost(postId: string): string {
    return this.#signer.sign(POSTS, postId);
  }

  /** The post a list cursor resumes after; invalid-cursor for any other cursor. */
  postOf(cursor: string): string {
    return this.#signer.verify(POSTS, cursor, STREAM_ID);
  }

  /** The cursor that resumes the replies of `threadId` after its reply `replyId`. */
  afterReply(threadId: string, replyId: string): string {
    return this.#signer.sign(POSTS, `thread ${threadId} after ${replyId}`);
  }

  /** The reply a cursor of `threadId`'s replies resumes after; invalid-cursor for another thread's, or another list's. */
  replyOf(cursor: string, threadId: string): string {
    const [, thread, replyId = ''] = REPLIES_POSITION.exec(this.#signer.verify(POSTS, cursor, REPLIES_POSITION)) ?? [];
    if (thread !== threadId) throw invalidCursor();
    return replyId;
  }

  /** A cursor of another position bound to the posts list (the record's search pages), which neither list takes. */
  sign(position: string): string {
    return this.#signer.sign(POSTS, position);
  }

  /** The position of a cursor `sign` made, if it has the shape `position`; otherwise invalid-cursor. */
  verify(cursor: string, position: RegExp): string {
    return this.#signer.verify(POSTS, cursor, position);
  }
}
