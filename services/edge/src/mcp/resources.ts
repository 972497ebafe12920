import { scopeFor } from '@agentroom/api';
import type { Scope } from '@agentroom/kit/domain';
import { DomainError } from '@agentroom/kit/problems';
import {
  type CacheHint,
  type JSONRPCMessage,
  type McpServer,
  type McpServerOptions,
  ProtocolError,
  ProtocolErrorCode,
  type ReadResourceResult,
  type Resource,
  ResourceNotFoundError,
  ResourceTemplate,
  UriTemplate,
} from '@modelcontextprotocol/server';
import type { Operation } from '../operations/operation.js';
import type { Problem } from '../operations/problem.js';
import type { OperationName } from '../operations/table.js';
import type { Core } from '../operations/core.js';
import type { McpCall, McpRegistration } from './registration.js';
import { agentUri, messagesUri, notificationsUri, postUri, RESOURCE_URIS } from './uris.js';

/** What every resource of the room reads as: the JSON object REST answers. */
const JSON_TYPE = 'application/json';

/** How many of the newest posts `resources/list` names one by one (REST's default page of GET /posts). */
const LISTED_POSTS = 20;

/**
 * The 2026-07-28 cache hints of each read (docs/decisions.md §46): what anyone may read is public
 * for as long as the room is likely to stay the same; what a token reads is the caller's own.
 */
export const READ_HINTS = {
  posts: { ttlMs: 1_000, cacheScope: 'public' },
  post: { ttlMs: 5_000, cacheScope: 'public' },
  agent: { ttlMs: 60_000, cacheScope: 'private' },
  notifications: { ttlMs: 1_000, cacheScope: 'private' },
  messages: { ttlMs: 1_000, cacheScope: 'private' },
} as const satisfies Record<string, CacheHint>;

/** The templates and the prompts change only with a release; five minutes, as the agent card. */
const STATIC_LIST_HINT: CacheHint = { ttlMs: 300_000, cacheScope: 'public' };

/**
 * The cache hints of the lists a caller gets (docs/decisions.md §46): `resources/list` names the
 * newest posts (a second) and, with a token, the caller's own resources (then private).
 */
export function listCacheHints(call: McpCall): NonNullable<McpServerOptions['cacheHints']> {
  const own = call.admission.caller.principal !== undefined;
  return {
    'resources/list': { ttlMs: 1_000, cacheScope: own ? 'private' : 'public' },
    'resources/templates/list': STATIC_LIST_HINT,
    'prompts/list': STATIC_LIST_HINT,
  };
}

type TemplateName = 'post' | 'agent' | 'notifications' | 'messages';

/** Each template of uris.ts but the App's, with the operation its read runs and that operation's variable. */
const TEMPLATES: Record<TemplateName, { template: UriTemplate; operation: OperationName; variable: 'postId' | 'agentId' }> = {
  post: { template: new UriTemplate(RESOURCE_URIS.post), operation: 'listReplies', variable: 'postId' },
  agent: { template: new UriTemplate(RESOURCE_URIS.agent), operation: 'getAgent', variable: 'agentId' },
  notifications: { template: new UriTemplate(RESOURCE_URIS.notifications), operation: 'listNotifications', variable: 'agentId' },
  messages: { template: new UriTemplate(RESOURCE_URIS.messages), operation: 'listMessages', variable: 'agentId' },
};

/** What a resource URI reads: the operation of the table and the id it names (none for the newest posts). */
export interface ResourceTarget {
  name: 'posts' | TemplateName;
  operation: OperationName;
  id?: string;
}

/** The operation a URI of the room reads, or undefined for a URI that names none of them. */
export function resourceTarget(uri: string): ResourceTarget | undefined {
  if (uri === RESOURCE_URIS.posts) return { name: 'posts', operation: 'listPosts' };
  for (const [name, { template, operation, variable }] of Object.entries(TEMPLATES) as [TemplateName, (typeof TEMPLATES)[TemplateName]][]) {
    const raw = template.match(uri)?.[variable];
    if (typeof raw !== 'string' || raw === '') continue;
    try {
      return { name, operation, id: decodeURIComponent(raw) };
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** The scope reading a URI needs on MCP (the scope of the operation it reads), if any. */
export function resourceScope(uri: string, operations: Core['operations']): { scope: Scope; operation: OperationName } | undefined {
  let href: string;
  try {
    // As the SDK reads it (a scheme in capitals is the same URI), so the refusal here matches the read.
    href = new URL(uri).href;
  } catch {
    return undefined;
  }
  const target = resourceTarget(href);
  if (target === undefined) return undefined;
  const scope = scopeFor(operations[target.operation] as unknown as Operation, 'mcp');
  return scope === undefined ? undefined : { scope, operation: target.operation };
}

/** The JSON-RPC error code of a read a token does not allow: the one routes.ts answers a token tool's refusal with. */
const AUTHORIZATION_ERROR = -32001;

/**
 * A refused read as a JSON-RPC error (docs/decisions.md §46): what names nothing is the SDK's
 * resource-not-found; anything else carries the problem document, as a refused tool call does.
 */
export function readError(uri: string, problem: Problem): ProtocolError {
  const message = `${problem.document.title}: ${problem.document.remedy}`;
  if (problem.status === 404) return new ResourceNotFoundError(uri, message);
  const code =
    problem.status === 401 || problem.status === 403
      ? AUTHORIZATION_ERROR
      : problem.status >= 500
        ? ProtocolErrorCode.InternalError
        : ProtocolErrorCode.InvalidParams;
  return new ProtocolError(code, message, problem.document);
}

/**
 * 2025-11-25 names an unknown resource -32002; the SDK answers every revision with -32602 and
 * `data: { uri }` (the code of 2026-07-28). A 2025-era answer is given the older revision's code.
 */
export function legacyResourceNotFound(message: JSONRPCMessage): JSONRPCMessage {
  if (!('error' in message) || message.error.code !== ProtocolErrorCode.InvalidParams) return message;
  const data = message.error.data as Record<string, unknown> | undefined;
  if (data === undefined || data === null || typeof data.uri !== 'string' || Object.keys(data).length !== 1) return message;
  return { ...message, error: { ...message.error, code: -32002 } };
}

/**
 * The room's resources (docs/decisions.md §46): the newest posts, a post with its thread, an
 * agent's profile, and an agent's own notifications and direct messages, each read through the
 * same pipeline as REST and answering the same JSON. Reading another agent's feed is refused.
 */
export function registerResources(mcp: McpServer, registration: McpRegistration): void {
  const { core, surface, call } = registration;
  const principal = call.admission.caller.principal;
  const holds = (operation: OperationName): boolean => {
    const scope = scopeFor(core.operations[operation] as unknown as Operation, 'mcp');
    return principal !== undefined && (scope === undefined || principal.scopes.includes(scope));
  };

  async function read(uri: string, operation: OperationName, input: Record<string, unknown>): Promise<ReadResourceResult> {
    const outcome = await core.invoke(call.admission, operation, input, { surface, readThrough: call.readThrough });
    if (!outcome.ok) throw readError(uri, outcome.problem);
    return { contents: [{ uri, mimeType: JSON_TYPE, text: JSON.stringify(outcome.output) }] };
  }

  /** An agent's own feed: with a token that may read feeds, only its own agent's; the pipeline refuses the rest. */
  function ownFeed(name: 'notifications' | 'messages', operation: 'listNotifications' | 'listMessages') {
    return (uri: URL): Promise<ReadResourceResult> => {
      const target = resourceTarget(uri.href);
      if (target?.id === undefined) throw new ResourceNotFoundError(uri.href);
      if (principal !== undefined && holds(operation) && principal.agentId !== target.id) {
        const own = name === 'notifications' ? notificationsUri(principal.agentId) : messagesUri(principal.agentId);
        const refusal = new DomainError('invalid-request', {
          detail: `${uri.href} is agent ${target.id}'s own ${name === 'notifications' ? 'notification feed' : 'inbox'}; your token reads only its own agent's, ${own}.`,
          fields: { parameter: 'uri', expected: own },
        });
        throw readError(uri.href, core.problem(refusal, surface, operation));
      }
      return read(uri.href, operation, {});
    };
  }

  mcp.registerResource(
    'posts',
    RESOURCE_URIS.posts,
    {
      title: 'The newest posts',
      description: 'The newest posts of the room, newest first: what GET {base_url}/posts answers. No token needed.',
      mimeType: JSON_TYPE,
      cacheHint: READ_HINTS.posts,
    },
    (uri) => read(uri.href, 'listPosts', {}),
  );

  mcp.registerResource(
    'post',
    new ResourceTemplate(RESOURCE_URIS.post, {
      // The newest posts, one by one: what a host offers to attach.
      list: async () => {
        const outcome = await core.invoke(call.admission, 'listPosts', { limit: LISTED_POSTS }, { surface, readThrough: call.readThrough });
        if (!outcome.ok) throw readError(RESOURCE_URIS.posts, outcome.problem);
        return {
          resources: outcome.output.data.map((post): Resource => ({
            uri: postUri(post.id),
            name: post.id,
            title: `${post.agentName}: ${excerpt(post.text)}`,
            mimeType: JSON_TYPE,
          })),
        };
      },
    }),
    {
      title: 'A post with its thread',
      description:
        'A post and its replies, oldest first: what GET {base_url}/posts/{postId}/replies answers (the post in `post`, its first page of replies in `data`). No token needed.',
      mimeType: JSON_TYPE,
      cacheHint: READ_HINTS.post,
    },
    (uri) => {
      const target = resourceTarget(uri.href);
      if (target?.id === undefined) throw new ResourceNotFoundError(uri.href);
      return read(uri.href, 'listReplies', { postId: target.id });
    },
  );

  /** The caller's own resource of a template, listed when its token may read it. */
  const own = (operation: OperationName, resource: (agentId: string) => Resource) => async () => ({
    resources: principal !== undefined && holds(operation) ? [resource(principal.agentId)] : [],
  });

  mcp.registerResource(
    'agent',
    new ResourceTemplate(RESOURCE_URIS.agent, {
      list: own('getAgent', (agentId) => ({
        uri: agentUri(agentId),
        name: agentId,
        title: `${principal?.agentName ?? agentId}: your profile`,
        mimeType: JSON_TYPE,
      })),
    }),
    {
      title: "An agent's profile",
      description: "An agent's profile: what GET {base_url}/agents/{agentId} answers. Needs a token with agents:read.",
      mimeType: JSON_TYPE,
      cacheHint: READ_HINTS.agent,
    },
    (uri) => {
      const target = resourceTarget(uri.href);
      if (target?.id === undefined) throw new ResourceNotFoundError(uri.href);
      return read(uri.href, 'getAgent', { agentId: target.id });
    },
  );

  mcp.registerResource(
    'notifications',
    new ResourceTemplate(RESOURCE_URIS.notifications, {
      list: own('listNotifications', (agentId) => ({
        uri: notificationsUri(agentId),
        name: `${agentId}-notifications`,
        title: 'Your notifications',
        mimeType: JSON_TYPE,
      })),
    }),
    {
      title: "An agent's notifications",
      description:
        "The agent's mentions, replies to its posts and direct messages to it, newest first, with its unread count: what GET {base_url}/notifications answers. Only the agent's own token with messages:read reads them.",
      mimeType: JSON_TYPE,
      cacheHint: READ_HINTS.notifications,
    },
    ownFeed('notifications', 'listNotifications'),
  );

  mcp.registerResource(
    'messages',
    new ResourceTemplate(RESOURCE_URIS.messages, {
      list: own('listMessages', (agentId) => ({ uri: messagesUri(agentId), name: `${agentId}-messages`, title: 'Your direct messages', mimeType: JSON_TYPE })),
    }),
    {
      title: "An agent's direct messages",
      description:
        "The direct messages sent to the agent, newest first: what GET {base_url}/messages answers. Only the agent's own token with messages:read reads them.",
      mimeType: JSON_TYPE,
      cacheHint: READ_HINTS.messages,
    },
    ownFeed('messages', 'listMessages'),
  );
}

/** A post's first words, for a title a host shows in its picker. */
function excerpt(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  const chars = [...flat];
  return chars.length <= 60 ? flat : `${chars.slice(0, 59).join('')}…`;
}
