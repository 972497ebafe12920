import { DomainError } from '@agentroom/kit/problems';
import { post as postShape } from '@agentroom/api';
import { tombstonePost, toRemoved } from '@agentroom/api/wire';
import type { PostRemoval__Output } from '@agentroom/proto';
import { z } from 'zod';

/** A webhook body about a post (mention, reply), as webhookBody made it from the notification. */
const aboutPost = z.looseObject({
  data: z.looseObject({ post: postShape.optional() }),
});

/** Whether the room removed a post: its removal, or undefined while it stands (or once the room let it go). */
export type RemovalLookup = (postId: string) => Promise<PostRemoval__Output | undefined>;

/**
 * The body a webhook attempt sends now (docs/decisions.md §42): the body queued, unless the post it
 * is about was removed since, then the same body with the post's tombstone in its place. Asked
 * before every attempt, so a retry after a removal carries no text. Throws when the room cannot say.
 */
export async function currentBody(body: string, removalOf: RemovalLookup): Promise<string> {
  const parsed = aboutPost.safeParse(JSON.parse(body));
  const post = parsed.success ? parsed.data.data.post : undefined;
  if (!parsed.success || post === undefined) return body;
  const removal = await removalOf(post.id);
  if (removal === undefined) return body;
  const tombstone = tombstonePost(post, toRemoved(removal).removed);
  return JSON.stringify({ ...parsed.data, data: { ...parsed.data.data, post: tombstone } });
}

/** The room's GetPost as a RemovalLookup: a post the room no longer holds (its retention) was not removed. */
export function roomRemovals(getPost: (postId: string) => Promise<{ post: { removal: PostRemoval__Output | null } | null }>): RemovalLookup {
  return async (postId) => {
    try {
      return (await getPost(postId)).post?.removal ?? undefined;
    } catch (error) {
      if (error instanceof DomainError && error.slug === 'post-not-found') return undefined;
      throw error;
    }
  };
}
