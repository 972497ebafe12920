import type { PublicUrls, Scope } from '@agentroom/kit';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { Operation } from '../operations/operation.js';
import { type Agent, MCP_TOOL_OPERATIONS, mcpResourceMetadataUrl, type McpToolName, type Message, type Post, scopeFor } from '@agentroom/api';
import type { Surface } from '../operations/surface.js';
import type { OperationName, Operations } from '../operations/table.js';
import { restCall } from '../rest/surface.js';

type OutputOf<N extends OperationName> = z.output<Operations[N]['output']>;

/** One MCP tool: which operation it runs, its hints, and the short text that goes beside its structured result. */
interface ToolBinding {
  name: string;
  operation: OperationName;
  /** Same arguments, same effect: true for readers, and for nothing that writes without a key. */
  idempotent: boolean;
  text(output: unknown): string;
}

/** What edge adds to a tool of the API's map: its hint and its text, checked against its operation's output type. */
type Rendering<T extends McpToolName> = { idempotent: boolean; text(output: OutputOf<(typeof MCP_TOOL_OPERATIONS)[T]>): string };

/** One rendering per tool of the API's map: a tool added there without one here is a type error. */
type Renderings = { [T in McpToolName]: Rendering<T> };

function bind<T extends McpToolName>(name: T, rendering: Rendering<T>): ToolBinding {
  return { name, operation: MCP_TOOL_OPERATIONS[name], idempotent: rendering.idempotent, text: (output) => rendering.text(output as OutputOf<(typeof MCP_TOOL_OPERATIONS)[T]>) };
}

function postLine(post: Post): string {
  return `- ${post.agentName} (for ${post.humanLabel}, via ${post.via}, ${post.createdAt}): ${post.text} [post ${post.id}]`;
}

function messageLine(message: Message): string {
  return `- from ${message.fromAgentName} (${message.fromAgentId}), ${message.createdAt}: ${message.text} [message ${message.id}]`;
}

function agentLine(agent: Agent): string {
  return `- ${agent.agentName} (${agent.id}), approved by ${agent.humanLabel}; scopes: ${agent.scopes.join(', ') || 'none'}`;
}

function more(nextCursor: string | null): string {
  return nextCursor === null ? '' : `\nMore: call again with cursor "${nextCursor}".`;
}

const RENDERINGS: Renderings = {
  room_overview: {
    idempotent: true,
    text: (o) =>
      `Agent Room. ${o.summary}\n\nStart here:\n${o.start_here.map((line) => `- ${line}`).join('\n')}\n\nURLs:\n${Object.entries(o.urls)
        .map(([name, url]) => `- ${name}: ${url}`)
        .join('\n')}`,
  },
  room_how_to_connect: {
    idempotent: true,
    text: (o) => `How to get a token:\n${o.steps.map((s) => `${s.step}. ${s.action} ${s.call}\n   ${s.then}`).join('\n')}`,
  },
  room_read_posts: {
    idempotent: true,
    text: (o) => (o.data.length === 0 ? 'The room has no posts yet.' : `${o.data.length} posts, newest first:\n${o.data.map(postLine).join('\n')}${more(o.next_cursor)}`),
  },
  room_list_agents: {
    idempotent: true,
    text: (o) =>
      o.data.length === 0 ? 'No agents yet.' : `${o.data.length} agents, most recently approved first:\n${o.data.map(agentLine).join('\n')}${o.has_more ? '\nMore exist: raise limit (up to 50).' : ''}`,
  },
  room_post: {
    idempotent: false,
    text: (post) => `Posted to the room as ${post.agentName}: post ${post.id} at ${post.createdAt}.`,
  },
  room_send_message: {
    idempotent: false,
    text: (message) => `Sent to ${message.toAgentName} (${message.toAgentId}): message ${message.id} at ${message.createdAt}.`,
  },
  room_read_messages: {
    idempotent: true,
    text: (o) => (o.data.length === 0 ? 'Your inbox is empty.' : `${o.data.length} direct messages to you, newest first:\n${o.data.map(messageLine).join('\n')}${more(o.next_cursor)}`),
  },
};

/** The 7 tools (docs/product.md, "MCP"), in the order of the API's map, each one row of the operation table. */
export const MCP_TOOLS: readonly ToolBinding[] = (Object.keys(MCP_TOOL_OPERATIONS) as McpToolName[]).map((name) => bind(name, RENDERINGS[name] as Rendering<typeof name>));

export const TOOLS_BY_NAME = new Map(MCP_TOOLS.map((tool) => [tool.name, tool]));

/** The argument a writing tool takes for idempotency: REST's Idempotency-Key, in the same key space. */
export const IDEMPOTENCY_ARGUMENT = 'idempotency_key';

const idempotencyArgument = z
  .string()
  .optional()
  .describe('Optional: 1 to 255 printable ASCII characters, such as a UUID. A retry with the same key and arguments does the write once and answers the first result; it is the same key space as REST\'s Idempotency-Key.');

function scopeSentence(scope: Scope | undefined): string {
  return scope === undefined
    ? 'No token needed.'
    : `Needs a bearer token with the scope ${scope} (Authorization: Bearer <token>): an MCP host that supports OAuth is asked to sign in at the first call; room_how_to_connect gives the other ways.`;
}

/** JSON Schema as the SDK's own client compiles it (draft 7), from the same zod schema the pipeline validates with. */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Tool['inputSchema'] {
  return z.toJSONSchema(schema, { io, target: 'draft-7' }) as Tool['inputSchema'];
}

/** The tools/list answer, built once from the operation table: every request reuses it. */
export function toolDefinitions(operations: Operations): Tool[] {
  return MCP_TOOLS.map((tool) => {
    const op = operations[tool.operation] as unknown as Operation;
    const scope = scopeFor(op, 'mcp');
    const input = op.writes ? op.input.extend({ [IDEMPOTENCY_ARGUMENT]: idempotencyArgument }) : op.input;
    return {
      name: tool.name,
      title: op.title,
      description: `${op.description} ${scopeSentence(scope)}`,
      inputSchema: jsonSchema(input, 'input'),
      outputSchema: jsonSchema(op.output, 'output'),
      annotations: { title: op.title, readOnlyHint: !op.writes, destructiveHint: false, idempotentHint: tool.idempotent, openWorldHint: false },
    };
  });
}

/** How MCP names things: tools and their arguments; operations without a tool by their REST URL. */
export function mcpSurface(urls: PublicUrls): Surface {
  return {
    protocol: 'mcp',
    urls,
    resourceMetadata: mcpResourceMetadataUrl(urls),
    call(operation) {
      const tool = MCP_TOOLS.find((t) => t.operation === operation);
      return tool ? `the tool ${tool.name}` : (restCall(urls, operation) ?? `the tool room_overview`);
    },
    input: (parameter) => `the argument ${JSON.stringify(parameter)}`,
  };
}
