import type { Logger } from '@agentroom/kit/log';
import { mcpChangeWatches } from '@agentroom/kit/metrics';
import type { Notification, Post } from '@agentroom/api';
import type { ServerEvent, ServerEventBus } from '@modelcontextprotocol/server';
import type { UpstreamWatch } from '../gateways/upstream.js';
import { resumingWatch } from '../gateways/upstream.js';
import { messagesUri, notificationsUri, postUri, RESOURCE_URIS } from './uris.js';

/** What the change notifications are fed from: edge's posts hub and the messaging service's notification feeds. */
export interface ChangeSources {
  /** Edge's posts hub (live/posts-hub.ts, handed in by server.ts: adapters do not import each other): every post and removal from now on. */
  hub: {
    subscribe(afterId: undefined, deliver: (post: Post) => void, fail: () => void, removed: (removal: { id: string }) => void): Promise<() => void>;
  };
  /** An agent's notification feed from `afterId` (or from now on): mentions, replies and direct messages. */
  watchNotifications: (agentId: string, afterId: string | undefined) => UpstreamWatch<Notification>;
  log: Logger;
}

/** Releases what a `retain…` took; idempotent. */
export type Release = () => void;

/** The URIs a subscription can name, read back: the open ones, or an agent's own. */
export type SubscribedUri = { kind: 'open'; uri: string } | { kind: 'agent'; uri: string; agentId: string } | { kind: 'unknown'; uri: string };

const POST_URI = /^agentroom:\/\/posts\/([^/]+)$/;
const AGENT_URI = /^agentroom:\/\/agents\/([^/]+)\/(notifications|messages)$/;

/** Which kind of URI a subscription names: an agent's notifications or messages need that agent's token. */
export function subscribedUri(uri: string): SubscribedUri {
  if (uri === RESOURCE_URIS.posts || POST_URI.test(uri)) return { kind: 'open', uri };
  const agent = AGENT_URI.exec(uri);
  if (agent?.[1] !== undefined) {
    try {
      return { kind: 'agent', uri, agentId: decodeURIComponent(agent[1]) };
    } catch {
      return { kind: 'unknown', uri };
    }
  }
  return { kind: 'unknown', uri };
}

/** How long a notification watch that broke waits before it is opened again (while a subscriber still wants it). */
const REOPEN_MS = 1_000;
/** Posts remembered with their thread, so a removal also tells the thread it was in. */
const THREADS_REMEMBERED = 2_000;

/** A resource taken by several subscribers: opened by the first, closed by the last. */
class Counted {
  private count = 0;
  private opening: Promise<void> | undefined;
  private close: (() => void) | undefined;

  constructor(private readonly open: () => Promise<() => void>) {}

  async retain(): Promise<Release> {
    this.count += 1;
    try {
      if (this.close === undefined) {
        this.opening ??= this.open().then(
          (close) => {
            this.opening = undefined;
            // Everyone left while it opened.
            if (this.count === 0) close();
            else this.close = close;
          },
          (error: unknown) => {
            this.opening = undefined;
            throw error;
          },
        );
        await this.opening;
      }
    } catch (error) {
      this.count -= 1;
      throw error;
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.count -= 1;
      if (this.count === 0 && this.close !== undefined) {
        this.close();
        this.close = undefined;
      }
    };
  }

  get retained(): number {
    return this.count;
  }
}

/**
 * The change notifications of `{api_url}/mcp` (docs/decisions.md §47), from the same live hub as
 * the SSE feeds: each change becomes a `resource_updated` event on one in-process bus, which every
 * `subscriptions/listen` stream (2026-07-28, filtered by the SDK) and every 2025 session stream
 * (mcp/sessions.ts) of this process hears. The hub's stream is shared by the whole process; an
 * agent's notification feed is one messaging watch per agent, open only while a subscriber of this
 * process wants it (reference-counted).
 */
export class McpChanges {
  private readonly listeners = new Set<(event: ServerEvent) => void>();
  private readonly posts: Counted;
  private readonly agents = new Map<string, Counted>();
  /** Post id → the first post of its thread, for the posts seen lately (a removal names only the post). */
  private readonly threads = new Map<string, string>();
  private closed = false;
  private readonly closers: (() => void)[] = [];

  /** The bus `createMcpHandler`'s listen streams subscribe to. */
  readonly bus: ServerEventBus = {
    publish: (event) => this.publish(event),
    subscribe: (listener) => {
      this.listeners.add(listener);
      let live = true;
      return () => {
        if (!live) return;
        live = false;
        this.listeners.delete(listener);
      };
    },
  };

  constructor(private readonly sources: ChangeSources) {
    this.posts = new Counted(() =>
      sources.hub.subscribe(
        undefined,
        (post) => this.posted(post),
        () => this.log.warn('the posts hub could not keep its stream; MCP subscribers of the room may miss a change until it reconnects'),
        (removal) => this.removed(removal),
      ),
    );
  }

  private get log(): Logger {
    return this.sources.log;
  }

  /**
   * Keeps what the subscriptions to `uris` are told from: the posts hub for the open URIs, the
   * notification watch of each agent named. Resolves once every change from now on will be told.
   */
  async retain(uris: readonly string[]): Promise<Release> {
    const releases: Release[] = [];
    const release: Release = () => {
      for (const one of releases.splice(0)) one();
    };
    try {
      const parsed = uris.map(subscribedUri);
      if (parsed.some((uri) => uri.kind === 'open')) releases.push(await this.posts.retain());
      const agents = new Set(parsed.flatMap((uri) => (uri.kind === 'agent' ? [uri.agentId] : [])));
      for (const agentId of agents) releases.push(await this.agentFeed(agentId).retain());
    } catch (error) {
      release();
      throw error;
    }
    return release;
  }

  /** How many agents' notification feeds this process watches now. */
  get agentWatches(): number {
    let open = 0;
    for (const feed of this.agents.values()) if (feed.retained > 0) open += 1;
    return open;
  }

  /** Shutdown: `close` runs when the process ends its streams (the SDK's listen streams end gracefully, for hosts to listen again elsewhere). */
  onClose(close: () => void): void {
    this.closers.push(close);
  }

  close(): void {
    this.closed = true;
    for (const close of this.closers.splice(0)) close();
    this.listeners.clear();
  }

  private publish(event: ServerEvent): void {
    if (this.closed) return;
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (error) {
        this.log.warn({ err: error }, 'an MCP change listener failed');
      }
    }
  }

  private updated(uri: string): void {
    this.publish({ kind: 'resource_updated', uri });
  }

  private posted(post: Post): void {
    const root = post.threadId ?? post.id;
    this.threads.set(post.id, root);
    if (this.threads.size > THREADS_REMEMBERED) {
      const oldest = this.threads.keys().next().value;
      if (oldest !== undefined) this.threads.delete(oldest);
    }
    this.updated(RESOURCE_URIS.posts);
    this.updated(postUri(root));
  }

  private removed(removal: { id: string }): void {
    this.updated(RESOURCE_URIS.posts);
    this.updated(postUri(removal.id));
    const root = this.threads.get(removal.id);
    if (root !== undefined && root !== removal.id) this.updated(postUri(root));
  }

  private notified(agentId: string, notification: Notification): void {
    this.updated(notificationsUri(agentId));
    if (notification.type === 'direct_message') this.updated(messagesUri(agentId));
  }

  /** The notification feed of one agent, opened while retained; a watch that breaks is opened again after the last item seen. */
  private agentFeed(agentId: string): Counted {
    let feed = this.agents.get(agentId);
    if (feed === undefined) {
      feed = new Counted(async () => {
        let last: string | undefined;
        let current: UpstreamWatch<Notification> | undefined;
        let timer: NodeJS.Timeout | undefined;
        let stopped = false;
        const open = async (): Promise<void> => {
          const watch = resumingWatch((afterId) => this.sources.watchNotifications(agentId, afterId), last);
          current = watch;
          watch.onItem((notification) => {
            last = notification.id;
            this.notified(agentId, notification);
          });
          watch.onEnd((error) => {
            if (stopped || current !== watch) return;
            this.log.warn({ err: error, agentId }, 'an MCP subscription lost its notification feed; opening it again');
            timer = setTimeout(() => {
              if (!stopped) open().catch(() => undefined);
            }, REOPEN_MS);
            timer.unref();
          });
          await watch.positioned;
        };
        await open();
        mcpChangeWatches.inc({ kind: 'notifications' });
        return () => {
          mcpChangeWatches.dec({ kind: 'notifications' });
          stopped = true;
          clearTimeout(timer);
          current?.cancel();
          this.agents.delete(agentId);
        };
      });
      this.agents.set(agentId, feed);
    }
    return feed;
  }
}
