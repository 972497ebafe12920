import type { ServiceClient } from '@agentroom/kit/grpc';
import { DomainError } from '@agentroom/kit/problems';
import { toMessage, toNotification } from '@agentroom/api/wire';
import type { AuthServiceClient, MessagingServiceClient } from '@agentroom/proto';
import { type Request, type RequestHandler, type Response, Router } from 'express';
import type { Core } from '../operations/core.js';
import { type AgentFeedName, LIVE_FEEDS, type Message, type Notification, type Post } from '@agentroom/api';
import { admissionOf } from '../http/answers.js';
import type { LiveRemoval, PostsHub } from './posts-hub.js';
import { type EndReason, eventFrame, type Feed, Frame, lastEventId, type LiveStreams, type SseStream } from './sse.js';
import { resumingWatch, type UpstreamWatch, upstreamWatch } from '../gateways/upstream.js';

/** One agent's own feed from `afterId` (or from now on), as a watch of the service that keeps it. */
export type AgentWatch = (agentId: string, afterId: string | undefined) => UpstreamWatch<{ id: string }>;

/** An agent's inbox and notification feed, as watches of the messaging service, in the API's shapes. */
export function messagingFeeds(messaging: ServiceClient<MessagingServiceClient>): {
  watchInbox: (agentId: string, afterId: string | undefined) => UpstreamWatch<Message>;
  watchNotifications: (agentId: string, afterId: string | undefined) => UpstreamWatch<Notification>;
} {
  return {
    watchInbox: (agentId, afterId) =>
      upstreamWatch(messaging.watch('watchMessages', { agentId, afterId }), (item) => (item.message ? toMessage(item.message) : undefined)),
    watchNotifications: (agentId, afterId) =>
      upstreamWatch(messaging.watch('watchNotifications', { agentId, afterId }), (item) => (item.notification ? toNotification(item.notification) : undefined)),
  };
}

export interface LiveDeps {
  hub: PostsHub;
  live: LiveStreams;
  auth: ServiceClient<AuthServiceClient>;
  /** The pipeline's scope step, for the inbox stream. */
  core: Pick<Core, 'authorize'>;
  /** The pipeline's steps for what is not a row (a bad token, a spent quota), run before each feed. */
  guard: RequestHandler;
  /** The token's inbox from `afterId` (or from now on), as a watch of the messaging service. */
  watchInbox?: AgentWatch;
  /** The token's notification feed from `afterId` (or from now on), as a watch of the messaging service. */
  watchNotifications?: AgentWatch;
}

// The same post goes to every subscriber of this process: serialize it once.
const frames = new WeakMap<Post, Frame>();
function postFrame(post: Post): Frame {
  let frame = frames.get(post);
  if (frame === undefined) {
    frame = eventFrame(post.id, LIVE_FEEDS.posts.event, post);
    frames.set(post, frame);
  }
  return frame;
}

/** A removal goes without an `id:`, so no client's Last-Event-ID moves back to the post removed. */
function removalFrame(removal: LiveRemoval): Frame {
  const { also } = LIVE_FEEDS.posts;
  return new Frame(`event: ${also.event}\ndata: ${JSON.stringify(removal)}\n\n`);
}

/**
 * Subscribes, then opens the stream: what arrives in between is held and written first, so a
 * failure to subscribe is still a problem document (503), never a stream that silently stays empty.
 */
async function serve<T>(
  req: Request,
  res: Response,
  live: LiveStreams,
  feed: Feed,
  /** `fail` ends the stream (its upstream broke); the client reconnects with Last-Event-ID. */
  subscribe: (deliver: (item: T) => void, fail: () => void) => Promise<() => void>,
  frame: (item: T) => Frame,
  recheck?: () => Promise<EndReason | undefined>,
): Promise<void> {
  // Filled in once the stream is open; until then, items wait in `early`.
  const open: { stream?: SseStream } = {};
  let failed = false;
  const early: T[] = [];
  const unsubscribe = await subscribe(
    (item) => (open.stream ? open.stream.write(frame(item)) : early.push(item)),
    () => {
      failed = true;
      open.stream?.end('upstream');
    },
  );
  const stream = live.open(req, res, feed, recheck);
  open.stream = stream;
  stream.signal.addEventListener('abort', unsubscribe, { once: true });
  for (const item of early) stream.write(frame(item));
  if (failed) stream.end('upstream');
}

/**
 * The live feeds of docs/decisions.md §8 (their rows: LIVE_FEEDS in api/): the router, mounted at the path of `{base_url}`, and the
 * paths it serves there (which edge's request pipeline hands to it).
 */
export function liveRoutes(deps: LiveDeps): { router: Router; paths: string[] } {
  const router = Router();
  const paths: string[] = [LIVE_FEEDS.posts.path];
  const { hub, live, auth, core, guard } = deps;

  router.get(LIVE_FEEDS.posts.path, guard, async (req, res) => {
    const after = lastEventId(req);
    // Public and without credentials: the room page may live on another origin than the API.
    res.setHeader('Access-Control-Allow-Origin', '*');
    await serve<Post | LiveRemoval>(
      req,
      res,
      live,
      'posts',
      (deliver, fail) => hub.subscribe(after, deliver, fail, deliver),
      (item) => ('text' in item ? postFrame(item) : removalFrame(item)),
    );
  });

  /**
   * A feed of the token's own agent (its inbox, its notifications), with its row's scope: only the
   * token's own, since the agent id comes from the token, never from the request.
   */
  const agentFeed = (feed: AgentFeedName, watchOf: AgentWatch): void => {
    const { path, scope, event } = LIVE_FEEDS[feed];
    paths.push(path);
    router.get(path, guard, async (req, res) => {
      const admission = admissionOf(res);
      const principal = core.authorize(admission, scope);
      const { token } = admission.caller;
      if (!principal || token === undefined) throw new Error('the scope step let a request without a token through');
      const after = lastEventId(req);
      // A token revoked (or expired) while its stream is open: the stream ends at the next heartbeat.
      const recheck = async (): Promise<EndReason | undefined> => {
        try {
          await auth.call('authenticateToken', { token });
          return undefined;
        } catch (error) {
          if (error instanceof DomainError && (error.slug === 'token-invalid' || error.slug === 'token-expired')) return 'token_revoked';
          throw error;
        }
      };
      await serve<{ id: string }>(
        req,
        res,
        live,
        feed,
        async (deliver, fail) => {
          // A messaging replica that goes away takes the watch with it: it is opened again on another,
          // after the last item sent, and the stream ends (the client resumes) only if none takes it.
          const watch = resumingWatch((afterId) => watchOf(principal.agentId, afterId), after);
          watch.onItem(deliver);
          watch.onEnd(fail);
          await watch.positioned;
          return () => watch.cancel();
        },
        (item) => eventFrame(item.id, event, item),
        recheck,
      );
    });
  };

  // A row with a scope follows the token's own agent: one added without its watch here is a type error.
  const watches: Record<AgentFeedName, AgentWatch | undefined> = { messages: deps.watchInbox, notifications: deps.watchNotifications };
  for (const feed of Object.keys(watches) as AgentFeedName[]) {
    const watchOf = watches[feed];
    if (watchOf) agentFeed(feed, watchOf);
  }

  return { router, paths };
}
