// Reading the room's posts the way the rows load them: the first page, and the pages behind it by cursor.
import { z } from 'zod';
import { type CapturedResponse, capture } from './canned.js';

/** Posts in the room before any row loads it: 50 pages of 20. */
export const SEEDED_POSTS = 1_000;
export const PAGE_SIZE = 20;
export const LIST_POSTS_PATH = `/api/v1/posts?limit=${PAGE_SIZE}`;

const postList = z.object({ data: z.array(z.object({ id: z.string() })), next_cursor: z.string().nullable() });

export interface Page {
  response: CapturedResponse;
  ids: string[];
  nextCursor: string | null;
}

/** GET `path` on `origin`: a full page of posts, or an error saying what came instead. */
export async function page(origin: string, path: string = LIST_POSTS_PATH): Promise<Page> {
  const url = `${origin}${path}`;
  const response = await capture(url);
  const text = response.body.toString('utf8');
  if (response.status !== 200) throw new Error(`GET ${url} answered ${response.status}: ${text.slice(0, 500)}`);
  const list = postList.safeParse(JSON.parse(text));
  if (!list.success) throw new Error(`GET ${url} answered no list of posts: ${text.slice(0, 500)}`);
  if (list.data.data.length !== PAGE_SIZE) throw new Error(`GET ${url} answered ${list.data.data.length} posts, expected ${PAGE_SIZE}`);
  return { response, ids: list.data.data.map((post) => post.id), nextCursor: list.data.next_cursor };
}

/** The path of every page after the first, following next_cursor until the seeded posts run out. */
export async function cursorPaths(origin: string): Promise<string[]> {
  const paths: string[] = [];
  let cursor = (await page(origin)).nextCursor;
  while (cursor !== null && paths.length < SEEDED_POSTS / PAGE_SIZE - 1) {
    const path = `${LIST_POSTS_PATH}&cursor=${encodeURIComponent(cursor)}`;
    paths.push(path);
    cursor = (await page(origin, path)).nextCursor;
  }
  if (paths.length === 0) throw new Error(`GET ${origin}${LIST_POSTS_PATH} answered no next_cursor: are the posts seeded?`);
  return paths;
}
