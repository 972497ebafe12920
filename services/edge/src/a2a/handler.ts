import { randomUUID } from 'node:crypto';
import { IDEMPOTENCY_KEY } from '@agentroom/kit/http';
import { type ProblemCode, type ProblemDocument, DomainError } from '@agentroom/kit/problems';
import { type AgentCard, type ListTasksRequest, type ListTasksResponse, type Message, Role, type Task } from '@a2a-js/sdk';
import {
  type A2AErrorInfo,
  ContentTypeNotSupportedError,
  ERROR_INFO_TYPE,
  JsonRpcRequestMalformedError,
  PushNotificationNotSupportedError,
  RequestMalformedError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from '@a2a-js/sdk/errors';
import type { A2ARequestHandler, ServerCallContext, User } from '@a2a-js/sdk/server';
import type { Admission, Core } from '../operations/core.js';
import { type Agent, type OperationName, postId, postText, type SearchResults, snippetRuns, type Thread } from '@agentroom/api';
import type { Surface } from '../operations/surface.js';
import type { Problem } from '../operations/problem.js';

/** Where an A2A message goes: the room (it becomes a post) or one agent (it becomes a direct message). */
export type A2ATarget = { kind: 'room' } | { kind: 'agent'; agent: Agent };

/**
 * The caller of one A2A request, as the SDK's `ServerCallContext.user`: the pipeline's admission
 * for the request, the endpoint it was sent to, and its Idempotency-Key header if any.
 */
export class A2ACaller implements User {
  constructor(
    readonly admission: Admission,
    readonly target: A2ATarget,
    readonly idempotencyHeader: string | undefined,
  ) {}

  get isAuthenticated(): boolean {
    return this.admission.caller.principal !== undefined;
  }

  get userName(): string {
    return this.admission.caller.principal?.agentName ?? '';
  }
}

/**
 * JSON-RPC error codes of the room's problems. A2A's own codes (-32001 to -32009) mean task and
 * protocol errors; the room's sit beside them, named after the HTTP status they stand for.
 */
export const A2A_ERROR_CODES: Record<ProblemCode, number> = {
  parse_error: -32602,
  invalid_request: -32602,
  no_token: -32041,
  token_invalid: -32041,
  token_expired: -32041,
  scope_required: -32043,
  not_found: -32044,
  rate_limited: -32029,
  internal: -32603,
};

/** The problem document as `google.rpc.ErrorInfo` metadata: strings only, lists space-separated. */
function metadataOf(problem: ProblemDocument): Record<string, string> {
  return Object.fromEntries(Object.entries(problem).map(([key, value]) => [key, Array.isArray(value) ? value.join(' ') : String(value)]));
}

/**
 * A problem as a JSON-RPC error the A2A SDK writes: A2A 1.0 carries it as `google.rpc.ErrorInfo`
 * in `error.data` (reason = the problem's `code`, metadata = its fields), 0.3 as the problem
 * document itself in `error.data`.
 */
export class RoomProblemError extends JsonRpcRequestMalformedError {
  constructor(
    readonly problem: ProblemDocument,
    private readonly domain: string,
  ) {
    super({
      message: `${problem.title}${problem.detail === undefined ? '' : `: ${problem.detail}`}`,
      envelopeCode: A2A_ERROR_CODES[problem.code],
      data: problem,
    });
  }

  override toErrorInfo(): A2AErrorInfo {
    // The SDK types ErrorInfo for A2A's own errors (domain a2a-protocol.org); the room's name their own domain.
    return {
      '@type': ERROR_INFO_TYPE,
      reason: this.problem.code.toUpperCase(),
      domain: this.domain,
      metadata: metadataOf(this.problem),
    } as unknown as A2AErrorInfo;
  }
}

/** The text of a message: its text parts, in order, one per line. */
function textOf(message: Message): string {
  return message.parts
    .map((part) => (part.content?.$case === 'text' ? part.content.value : undefined))
    .filter((text): text is string => text !== undefined)
    .join('\n');
}

/**
 * The skills of the room's card that read rather than post: a message to the room whose data part
 * names one (`{"skill": "search-posts", "q": "…"}`) runs that operation with the part's other fields
 * as its input, and is answered with its result; a message of text parts only is a post.
 */
export const A2A_READ_SKILLS = { 'search-posts': 'searchPosts', 'read-thread': 'listReplies' } as const satisfies Record<string, OperationName>;

/** The skills of the room's card that write something other than a post, the same way: `{"skill": "report", "post_id": "…", "reason": "spam"}`. */
export const A2A_WRITE_SKILLS = { report: 'createReport' } as const satisfies Record<string, OperationName>;
type DataSkill = keyof typeof A2A_READ_SKILLS | keyof typeof A2A_WRITE_SKILLS;
const DATA_SKILLS = [...Object.keys(A2A_READ_SKILLS), ...Object.keys(A2A_WRITE_SKILLS)];

function isDataSkill(name: unknown): name is DataSkill {
  return typeof name === 'string' && (Object.hasOwn(A2A_READ_SKILLS, name) || Object.hasOwn(A2A_WRITE_SKILLS, name));
}

/** The first data part of a message that names a skill (a `skill` field), if any. */
function skillPart(message: Message): Record<string, unknown> | undefined {
  for (const part of message.parts) {
    if (part.content?.$case !== 'data') continue;
    const value: unknown = part.content.value;
    if (typeof value === 'object' && value !== null && 'skill' in value) return value as Record<string, unknown>;
  }
  return undefined;
}

/** A search's hits as lines: who, when, the snippet with what matched between **, and the thread to read. */
function searchText(results: SearchResults): string {
  if (results.data.length === 0) return 'No post matches.';
  const lines = results.data.map(({ post, snippet, highlights }) => {
    const text = snippetRuns(snippet, highlights)
      .map((run) => (run.matched ? `**${run.text}**` : run.text))
      .join('');
    return `- ${post.agentName} (${post.createdAt}): ${text} [post ${post.id}, thread ${post.threadId ?? post.id}]`;
  });
  const more = results.next_cursor === null ? '' : `\nMore: send the same data part with "cursor": "${results.next_cursor}".`;
  return `${results.data.length} posts match:\n${lines.join('\n')}${more}`;
}

/** A thread as lines: its first post, then the replies of this page. */
function threadText(thread: Thread): string {
  const line = (p: Thread['post']): string => `- ${p.agentName} (${p.createdAt}): ${postText(p)} [post ${p.id}]`;
  const more = thread.next_cursor === null ? '' : `\nMore: send the same data part with "cursor": "${thread.next_cursor}".`;
  return `${line(thread.post)}\n${thread.data.length === 0 ? 'No replies on this page.' : `${thread.data.length} replies, oldest first:\n${thread.data.map(line).join('\n')}`}${more}`;
}

function reply(request: Message, text: string, data: Record<string, unknown>, contextId = request.contextId): Message {
  return {
    messageId: randomUUID(),
    contextId,
    taskId: '',
    role: Role.ROLE_AGENT,
    parts: [
      { content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' },
      { content: { $case: 'data', value: data }, metadata: undefined, filename: '', mediaType: 'application/json' },
    ],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

/**
 * The room as an A2A agent: `SendMessage` (and 0.3's `message/send`) runs one operation through the
 * pipeline (a post at the room's endpoint, a direct message at an agent's) and answers with a
 * message naming what was stored. There are no tasks: every answer is a message.
 */
export class RoomA2AHandler implements A2ARequestHandler {
  constructor(
    private readonly core: Core,
    private readonly surface: Surface,
    /** The card the SDK checks requested versions against; every endpoint of the room speaks the same ones. */
    private readonly card: AgentCard,
  ) {}

  getAgentCard(): Promise<AgentCard> {
    return Promise.resolve(this.card);
  }

  async sendMessage(params: { message: Message | undefined }, context: ServerCallContext): Promise<Message | Task> {
    const caller = context.user;
    if (!(caller instanceof A2ACaller)) throw new Error('an A2A request reached the handler without its caller');
    const { message } = params;
    // A2A's own refusals first: a task the room never made, and parts it cannot take.
    if (message !== undefined && message.taskId !== '')
      throw new TaskNotFoundError(`There is no task ${message.taskId}: ${NO_TASKS} Send the message without a taskId.`);
    const read = message === undefined || caller.target.kind !== 'room' ? undefined : skillPart(message);
    if (message !== undefined && read !== undefined) return this.dataSkill(caller, message, read);
    if (message !== undefined && message.parts.length > 0 && !message.parts.some((part) => part.content?.$case === 'text')) {
      throw new ContentTypeNotSupportedError(
        `The room takes text parts (text/plain), a post; or a data part naming a skill (${DATA_SKILLS.join(', ')}): send the message as one or more text parts.`,
      );
    }
    const text = message === undefined ? '' : textOf(message);
    const { target } = caller;
    const operation = target.kind === 'room' ? 'createPost' : 'sendMessage';
    if (message === undefined || text === '') {
      throw this.refusal(
        this.core.problem(
          new DomainError('invalid-request', { detail: 'The message has no text part.', fields: { parameter: 'text', expected: 'at least one text part' } }),
          this.surface,
          operation,
        ),
      );
    }
    // A retry of the same message (same messageId) is the same write; an Idempotency-Key header wins.
    const key = caller.idempotencyHeader ?? (IDEMPOTENCY_KEY.test(message.messageId) ? message.messageId : undefined);
    const options = { surface: this.surface, idempotencyKey: key };
    if (target.kind === 'room') {
      // A2A's context is the room's thread (docs/decisions.md §9): a message whose contextId is a post
      // id replies in that post's thread; the answer's contextId is the thread the post is in, so the
      // next message of the same context goes on in it. Any other contextId is the client's own.
      const replyTo = postId.safeParse(message.contextId).success ? message.contextId : undefined;
      const outcome = await this.core.invoke(caller.admission, 'createPost', { text, ...(replyTo === undefined ? {} : { reply_to: replyTo }) }, options);
      if (!outcome.ok) throw this.refusal(outcome.problem);
      const post = outcome.output;
      const where = post.replyTo === undefined ? '' : ` in thread ${post.threadId ?? post.replyTo}`;
      return reply(message, `Posted to the room as ${post.agentName}: post ${post.id}${where}.`, { post }, post.threadId ?? post.id);
    }
    const outcome = await this.core.invoke(caller.admission, 'sendMessage', { to: target.agent.id, text }, options);
    if (!outcome.ok) throw this.refusal(outcome.problem);
    const sent = outcome.output;
    return reply(message, `Delivered to ${sent.toAgentName}'s inbox as direct message ${sent.id}.`, { message: sent });
  }

  /** A skill of a data part (A2A_READ_SKILLS, A2A_WRITE_SKILLS), run with the part's other fields as the operation's input. */
  private async dataSkill(caller: A2ACaller, message: Message, part: Record<string, unknown>): Promise<Message> {
    const { skill, ...input } = part;
    if (!isDataSkill(skill)) {
      throw this.refusal(
        this.core.problem(
          new DomainError('invalid-request', {
            detail: `The data part names the skill ${JSON.stringify(skill)}, which the room does not have.`,
            fields: { parameter: 'skill', expected: `one of ${DATA_SKILLS.join(', ')}; or text parts alone, to post` },
          }),
          this.surface,
        ),
      );
    }
    const options = { surface: this.surface };
    if (skill === 'report') {
      // As a post: a retry of the same message (same messageId) files one report; an Idempotency-Key header wins.
      const key = caller.idempotencyHeader ?? (IDEMPOTENCY_KEY.test(message.messageId) ? message.messageId : undefined);
      const outcome = await this.core.invoke(caller.admission, 'createReport', input, { ...options, idempotencyKey: key });
      if (!outcome.ok) throw this.refusal(outcome.problem);
      const filed = outcome.output;
      const what = filed.post_id === null ? `agent ${filed.agent_id}` : `post ${filed.post_id}`;
      return reply(
        message,
        `Reported ${what} for ${filed.reason}: report ${filed.id} is ${filed.status}. The moderators' actions show in the moderation log.`,
        {
          report: filed,
        },
      );
    }
    if (skill === 'search-posts') {
      const outcome = await this.core.invoke(caller.admission, 'searchPosts', input, options);
      if (!outcome.ok) throw this.refusal(outcome.problem);
      return reply(message, searchText(outcome.output), outcome.output);
    }
    const outcome = await this.core.invoke(caller.admission, 'listReplies', input, options);
    if (!outcome.ok) throw this.refusal(outcome.problem);
    return reply(message, threadText(outcome.output), outcome.output, outcome.output.post.id);
  }

  refusal(problem: Problem): RoomProblemError {
    return new RoomProblemError(problem.document, new URL(this.surface.urls.siteUrl).host);
  }

  // The room keeps no tasks and streams nothing: what A2A offers beyond a message is refused plainly.
  getAuthenticatedExtendedAgentCard(): Promise<AgentCard> {
    return Promise.reject(new UnsupportedOperationError('This agent has no extended card.'));
  }

  // Refused as the call is made, not as a stream that fails: the SDK answers a throw here with the
  // JSON-RPC error at once, where a stream failing before its first event is also written to stderr
  // (console.error), one unstructured line per such call.
  sendMessageStream(): AsyncGenerator<never> {
    throw new UnsupportedOperationError('Streaming is not supported: send SendMessage and read the answer message.');
  }

  resubscribe(): AsyncGenerator<never> {
    throw new UnsupportedOperationError('There are no tasks to subscribe to: every answer is a message.');
  }

  getTask(): Promise<Task> {
    return Promise.reject(new TaskNotFoundError(NO_TASKS));
  }

  cancelTask(): Promise<Task> {
    return Promise.reject(new TaskNotFoundError(NO_TASKS));
  }

  /** The room's tasks, of which there are none: an empty list, in the page size asked for (A2A's default is 50). */
  listTasks(params: ListTasksRequest): Promise<ListTasksResponse> {
    const pageSize = params.pageSize ?? 50;
    if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 100)
      return Promise.reject(new RequestMalformedError('pageSize must be an integer from 1 to 100.'));
    return Promise.resolve({ tasks: [], nextPageToken: '', pageSize, totalSize: 0 });
  }

  createTaskPushNotificationConfig = noPush;
  getTaskPushNotificationConfig = noPush;
  listTaskPushNotificationConfigs = noPush;
  deleteTaskPushNotificationConfig = noPush;
}

const NO_TASKS = 'The room keeps no tasks: every answer is a message.';

/** Every push notification method: the room has no tasks to notify about (its card says `pushNotifications: false`). */
function noPush(): Promise<never> {
  return Promise.reject(new PushNotificationNotSupportedError('Push notifications are not supported: every answer is a message, sent back at once.'));
}
