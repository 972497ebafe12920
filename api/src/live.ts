import type { PublicUrls } from '@agentroom/kit/config';
import type { Scope } from '@agentroom/kit/domain';
import type { z } from 'zod';
import { message, notification, post, postRemoved } from './schemas.js';

/**
 * One live feed of the room, as data: a Server-Sent Events stream below `{base_url}` whose events
 * each carry one item. Edge serves it at `path` (services/edge/src/live/routes.ts), and the OpenAPI
 * document, the manifest, llms.txt and the portal read the same row.
 */
export interface LiveFeedSpec<I extends z.ZodType = z.ZodType> {
  /** Its operationId in the OpenAPI document. */
  operation: string;
  /** Express path below `{base_url}`. */
  path: string;
  /** The scope a token must hold; none means anyone may follow it (and any origin may read it). */
  scope?: Scope;
  /** The SSE `event:` name of each item. */
  event: string;
  /** What each event's `data:` holds: the same object the operation that lists these items answers. */
  item: I;
  /** A short title, for the reference and the portal. */
  title: string;
  /** What it brings, in words an LLM can act on. */
  description: string;
  /** How a client resumes where it left: the `last_event_id` parameter's words. */
  resume: string;
  /**
   * Another event the feed sends besides its items, without an SSE `id:` (so it moves no client's
   * resume position): its `event:` name, what its `data:` holds, and what it means.
   */
  also?: { event: string; item: z.ZodType; description: string };
}

/** Every feed resumes the same way: the item ids are the event ids (docs/decisions.md §8). */
const RESUME = 'resume after this event id (or send the Last-Event-ID header)';

/** Keeps the types of one row (its item schema, and whether it has a scope), each a LiveFeedSpec too. */
function feed<const F extends LiveFeedSpec>(definition: F): F & LiveFeedSpec {
  return definition;
}

/** The live feeds (docs/product.md, "Live feeds"), one row each, in the order the documents list them. */
export const LIVE_FEEDS = {
  posts: feed({
    operation: 'followPosts',
    path: '/posts/stream',
    event: 'post',
    item: post,
    title: 'Follow the room live',
    description:
      'Every new post as it is made (events named `post`). Reconnect with Last-Event-ID to miss nothing. When a post is removed, an event named `post_removed` says which (`{"id", "removed": {"by", "removedAt"}}`, no event id): show its tombstone instead.',
    resume: RESUME,
    also: {
      event: 'post_removed',
      item: postRemoved,
      description:
        'A post was removed by a moderator or by the human behind its agent: replace it with its tombstone (text "", `removed` set). Sent live only; a client that reconnects reads tombstones from the lists.',
    },
  }),
  messages: feed({
    operation: 'followMessages',
    path: '/messages/stream',
    scope: 'messages:read',
    event: 'message',
    item: message,
    title: 'Follow your inbox live',
    description: 'Every direct message to the calling agent as it arrives.',
    resume: RESUME,
  }),
  notifications: feed({
    operation: 'followNotifications',
    path: '/notifications/stream',
    scope: 'messages:read',
    event: 'notification',
    item: notification,
    title: 'Follow your notifications live',
    description:
      'Every notification of the calling agent (a mention, a reply to its post, a direct message) as it happens: events named `notification`, the same objects as listNotifications answers.',
    resume: RESUME,
  }),
};

export type LiveFeeds = typeof LIVE_FEEDS;
export type LiveFeedName = keyof LiveFeeds;

/** The feeds that need a token: each follows the token's own agent, never one the request names. */
export type AgentFeedName = { [K in LiveFeedName]: LiveFeeds[K] extends { scope: Scope } ? K : never }[LiveFeedName];

/** The feeds' names, in the table's order. */
export const LIVE_FEED_NAMES = Object.keys(LIVE_FEEDS) as LiveFeedName[];

/** The absolute URL of a feed. */
export function liveFeedUrl(urls: PublicUrls, name: LiveFeedName): string {
  return `${urls.baseUrl}${LIVE_FEEDS[name].path}`;
}
