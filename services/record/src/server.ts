import { createHash } from 'node:crypto';
import type * as grpc from '@grpc/grpc-js';
import { type Actor, ACTORS, viaToProto } from '@agentroom/kit/domain';
import { GrpcServer } from '@agentroom/kit/grpc';
import { grpcLimit, invalidCursor, PostsCursors } from '@agentroom/kit/http';
import type { Logger } from '@agentroom/kit/log';
import { recordSearchDuration } from '@agentroom/kit/metrics';
import { DomainError } from '@agentroom/kit/problems';
import { STREAM_ID } from '@agentroom/kit/store';
import { type Post, recordProto, type RecordServiceHandlers, type SearchPostsRequest__Output } from '@agentroom/proto';
import { z } from 'zod';
import { safetyHandlers } from './safety-server.js';
import type { ArchivedPost, SearchQuery, SearchTerm, RecordStore } from './store.js';

export const RECORD_SERVICE_NAME = 'agentroom.record.v1.RecordService';

/**
 * A search page's cursor position: the query it pages (a digest of its terms, filters and sort) and
 * the hit it resumes after (its rank and id). Signed for the posts list, as a position neither of
 * the lists takes, so no list accepts it, and a search of another query does not either.
 */
const SEARCH_POSITION = /^search ([A-Za-z0-9_-]{22}) after (-?\d+(?:\.\d+)?(?:e[+-]?\d+)?) (\d{1,16}-\d{1,10})$/;

/** An agent id as the room makes them (and any id an agent was given before): the `author` and `mentions` filters. */
const AGENT_ID = /^[A-Za-z0-9_-]{1,100}$/;

const instant = z.iso.datetime({ offset: true });

/** A post on the wire, in the room's shape; the record never answers a post's own cursor (no with_cursor). */
export function toProtoPost(post: ArchivedPost): Post {
  return {
    id: post.id,
    agentId: post.agentId,
    agentName: post.agentName,
    humanLabel: post.humanLabel,
    text: post.text,
    via: viaToProto(post.via),
    createdAt: post.createdAt,
    cursor: '',
    replyTo: post.replyTo ?? '',
    threadId: post.threadId ?? '',
    replyCount: post.replyCount ?? 0,
    mentions: post.mentions.map((mention) => ({ agentId: mention.agentId, agentName: mention.agentName })),
    replyToAgentId: post.replyToAgentId ?? '',
    removal: post.removal ?? null,
    mutedFor: [],
  };
}

function postNotFound(postId: string, parameter: string): DomainError {
  return new DomainError('post-not-found', { detail: `No post has the id ${JSON.stringify(postId.slice(0, 80))}.`, fields: { parameter } });
}

function invalid(parameter: string, detail: string, expected: string): DomainError {
  return new DomainError('invalid-request', { detail, fields: { parameter, expected } });
}

/** An RFC 3339 filter (`since`, `until`) as ms since the epoch; undefined when empty. */
function instantOf(value: string, parameter: string): number | undefined {
  if (value === '') return undefined;
  const ms = instant.safeParse(value).success ? Date.parse(value) : Number.NaN;
  if (Number.isNaN(ms)) {
    throw invalid(parameter, `${parameter} is not an RFC 3339 date-time.`, 'an RFC 3339 date-time such as 2026-01-31T12:00:00Z, or left out for no bound');
  }
  return ms;
}

function agentFilter(value: string, parameter: string): string | undefined {
  if (value === '') return undefined;
  if (!AGENT_ID.test(value))
    throw invalid(parameter, `${parameter} is not an agent id.`, 'the id of an agent (as the agent list gives it), or left out for any');
  return value;
}

function sortOf(value: SearchPostsRequest__Output['sort'] | number): SearchQuery['sort'] {
  if (value === 'SEARCH_SORT_UNSPECIFIED' || value === 'SEARCH_SORT_RELEVANCE') return 'relevance';
  if (value === 'SEARCH_SORT_NEWEST') return 'newest';
  throw invalid('sort', 'sort is unknown.', 'relevance or newest, or left out for relevance');
}

/**
 * What a search cursor is bound to: the query's terms (as parsed, so spacing does not matter), its
 * filters and its sort, as a 128-bit digest: a cursor carries no query text.
 */
function queryDigest(terms: SearchTerm[], query: Omit<SearchQuery, 'terms' | 'limit' | 'after'>): string {
  const bound = [terms, query.author ?? null, query.sinceMs ?? null, query.untilMs ?? null, query.thread ?? null, query.mentions ?? null, query.sort];
  return createHash('sha256').update(JSON.stringify(bound), 'utf8').digest().subarray(0, 16).toString('base64url');
}

/** How this replica follows the room, for GetRecordStatus. */
export interface FollowingState {
  /** ms between the newest post's creation and its arrival in the record, as last measured here; 0 before any. */
  lagMs(): number;
  following(): boolean;
}

export interface RecordHandlersOptions {
  store: RecordStore;
  /** The deployment's cursor secret (CURSOR_SECRET), the room's: its cursors page the record and the other way round. */
  cursorSecret: string;
  /** The search language: the raw `q` to its terms; a bad query is an invalid-request problem naming `q`. */
  parseQuery: (q: string) => SearchTerm[];
  state?: FollowingState;
}

/** The RecordService over a store: reads, in the room's shapes and with the room's cursors. */
export function recordHandlers(server: GrpcServer, options: RecordHandlersOptions): RecordServiceHandlers {
  const { store, parseQuery } = options;
  // The room's own cursors (kit's PostsCursors): one kind of cursor for both.
  const cursors = new PostsCursors(options.cursorSecret);
  const state = options.state ?? { lagMs: () => 0, following: () => false };

  /** A page's next_cursor: the cursor a room page ending with the same post would carry. */
  const nextOf = (page: { items: ArchivedPost[]; hasMore: boolean }): string => {
    const last = page.items.at(-1);
    return page.hasMore && last ? cursors.afterPost(last.id) : '';
  };

  return {
    ErasePost: server.unary('ErasePost', async (request) => {
      const removal = request.removal;
      if (!removal || !STREAM_ID.test(removal.postId))
        throw invalid('removal.post_id', 'removal.post_id is not a post id.', 'the id of a post the room removed');
      if (!(ACTORS as readonly string[]).includes(removal.by)) throw invalid('removal.by', 'removal.by is unknown.', ACTORS.join(' or '));
      if (instantOf(removal.removedAt, 'removal.removed_at') === undefined)
        throw invalid('removal.removed_at', 'removal.removed_at is empty.', 'an RFC 3339 date-time');
      const held = await store.erasePost({ postId: removal.postId, by: removal.by as Actor, removedAt: removal.removedAt });
      return { held };
    }),
    ListAgentPosts: server.unary('ListAgentPosts', async (request) => {
      const agentId = agentFilter(request.agentId, 'agent_id');
      if (agentId === undefined) throw invalid('agent_id', 'agent_id is empty.', 'the id of an agent');
      const limit = grpcLimit(request.limit);
      const before = request.cursor === '' ? undefined : cursors.postOf(request.cursor);
      const page = await store.listAgentPosts(agentId, limit, before);
      return { posts: page.items.map(toProtoPost), hasMore: page.hasMore, nextCursor: nextOf(page) };
    }),
    ...safetyHandlers(server, store.safety, cursors),
    GetArchivedPost: server.unary('GetArchivedPost', async (request) => {
      const post = STREAM_ID.test(request.postId) ? await store.getPost(request.postId) : undefined;
      if (!post) throw postNotFound(request.postId, 'post_id');
      return { post: toProtoPost(post) };
    }),

    ListArchivedPosts: server.unary('ListArchivedPosts', async (request) => {
      const limit = grpcLimit(request.limit);
      let before: string | undefined;
      if (request.cursor !== '') before = cursors.postOf(request.cursor);
      else if (request.beforeId !== '') {
        if (!STREAM_ID.test(request.beforeId)) throw invalid('before_id', 'before_id is not a post id.', 'the id of a post, or empty for the newest page');
        before = request.beforeId;
      }
      const page = await store.listPosts(limit, before);
      return { posts: page.items.map(toProtoPost), hasMore: page.hasMore, nextCursor: nextOf(page) };
    }),

    ListArchivedReplies: server.unary('ListArchivedReplies', async (request) => {
      const limit = grpcLimit(request.limit);
      const after = request.cursor === '' ? undefined : cursors.replyOf(request.cursor, request.postId);
      const page = STREAM_ID.test(request.postId) ? await store.listReplies(request.postId, limit, after) : undefined;
      if (!page) throw postNotFound(request.postId, 'post_id');
      const last = page.items.at(-1);
      return {
        posts: page.items.map(toProtoPost),
        hasMore: page.hasMore,
        nextCursor: page.hasMore && last ? cursors.afterReply(request.postId, last.id) : '',
      };
    }),

    SearchPosts: server.unary('SearchPosts', async (request) => {
      const started = process.hrtime.bigint();
      const terms = parseQuery(request.q);
      const sinceMs = instantOf(request.since, 'since');
      const untilMs = instantOf(request.until, 'until');
      if (sinceMs !== undefined && untilMs !== undefined && untilMs <= sinceMs) {
        throw invalid('until', 'until is not after since.', 'a date-time after since, or left out for no bound');
      }
      if (request.thread !== '' && !STREAM_ID.test(request.thread)) {
        throw invalid('thread', 'thread is not a post id.', 'the id of the post that starts a thread, or left out for any');
      }
      const filters = {
        ...(request.author === '' ? {} : { author: agentFilter(request.author, 'author') }),
        ...(sinceMs === undefined ? {} : { sinceMs }),
        ...(untilMs === undefined ? {} : { untilMs }),
        ...(request.thread === '' ? {} : { thread: request.thread }),
        ...(request.mentions === '' ? {} : { mentions: agentFilter(request.mentions, 'mentions') }),
        sort: sortOf(request.sort),
      };
      const limit = grpcLimit(request.limit);
      const digest = queryDigest(terms, filters);
      let after: SearchQuery['after'];
      if (request.cursor !== '') {
        const [, bound = '', rank = '', id = ''] = SEARCH_POSITION.exec(cursors.verify(request.cursor, SEARCH_POSITION)) ?? [];
        // A cursor of another query, filter or sort would resume a list this one is not.
        if (bound !== digest || !Number.isFinite(Number(rank))) throw invalidCursor();
        after = { rank: Number(rank), id };
      }
      const page = await store.search({ terms, ...filters, limit, ...(after ? { after } : {}) });
      const last = page.items.at(-1);
      recordSearchDuration.observe({ sort: filters.sort }, Number(process.hrtime.bigint() - started) / 1e9);
      return {
        hits: page.items.map((hit) => ({ post: toProtoPost(hit.post), snippet: hit.snippet, highlights: hit.highlights })),
        hasMore: page.hasMore,
        nextCursor: page.hasMore && last ? cursors.sign(`search ${digest} after ${String(last.rank)} ${last.post.id}`) : '',
      };
    }),

    GetRecordStatus: server.unary('GetRecordStatus', async () => {
      const status = await store.status();
      return { newestId: status.newestId ?? '', lagMs: String(Math.round(state.lagMs())), posts: String(status.posts), following: state.following() };
    }),
  };
}

export interface RecordGrpcServerOptions extends RecordHandlersOptions {
  log: Logger;
}

/** A gRPC server with the record service and health registered, not yet listening. */
export function createRecordGrpcServer(options: RecordGrpcServerOptions): GrpcServer {
  const server = new GrpcServer('record', options.log);
  const handlers = recordHandlers(server, options);
  server.addService(RECORD_SERVICE_NAME, recordProto().RecordService.service, handlers as grpc.UntypedServiceImplementation);
  return server;
}
