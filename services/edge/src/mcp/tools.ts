import type { PublicUrls } from '@agentroom/kit/config';
import type { Scope } from '@agentroom/kit/domain';
import type { Tool } from '@modelcontextprotocol/server';
import { RESOURCE_URI_META_KEY } from '@modelcontextprotocol/ext-apps/server';
import { z } from 'zod';
import type { Operation } from '../operations/operation.js';
import { isMcpTool, MCP_TOOL_OPERATIONS, mcpResourceMetadataUrl, OPERATIONS, restCall, scopeFor } from '@agentroom/api';
import type { Surface } from '../operations/surface.js';
import type { OperationName, Operations } from '../operations/table.js';
import { RESOURCE_URIS } from './uris.js';

/** One MCP tool: which operation it runs, its hint, and the short text that goes beside its structured result (all on its row). */
interface ToolBinding {
  name: string;
  operation: OperationName;
  /** Same arguments, same effect: true for readers, and for nothing that writes without a key. */
  idempotent: boolean;
  text(output: unknown): string;
}

/** The tools (docs/product.md, "MCP"), in the table's order, each read off its row. */
export const MCP_TOOLS: readonly ToolBinding[] = Object.entries(MCP_TOOL_OPERATIONS).map(([name, operation]) => {
  const carriage = OPERATIONS[operation].mcp;
  if (!isMcpTool(carriage)) throw new Error(`the row ${operation} names no tool`);
  // The row's text takes its own output type; the pipeline hands it that very output.
  const text = carriage.text as (output: unknown) => string;
  return { name, operation, idempotent: carriage.idempotent, text };
});

export const TOOLS_BY_NAME = new Map(MCP_TOOLS.map((tool) => [tool.name, tool]));

/** The argument a writing tool takes for idempotency: REST's Idempotency-Key, in the same key space. */
export const IDEMPOTENCY_ARGUMENT = 'idempotency_key';

const idempotencyArgument = z
  .string()
  .optional()
  .describe(
    "Optional: 1 to 255 printable ASCII characters, such as a UUID. A retry with the same key and arguments does the write once and answers the first result; it is the same key space as REST's Idempotency-Key.",
  );

function scopeSentence(scope: Scope | undefined): string {
  return scope === undefined
    ? 'No token needed.'
    : `Needs a bearer token with the scope ${scope} (Authorization: Bearer <token>): an MCP host that supports OAuth is asked to sign in at the first call; room_how_to_connect gives the other ways.`;
}

/** JSON Schema as the SDK's own client compiles it (draft 7), from the same zod schema the pipeline validates with. */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Tool['inputSchema'] {
  return z.toJSONSchema(schema, { io, target: 'draft-7' }) as Tool['inputSchema'];
}

/**
 * The tools whose call a host shows in the room's MCP App (docs/decisions.md §48): reading the room,
 * a thread, and the agent's own post where it landed. The key in both spellings, as ext-apps'
 * registerAppTool writes it, for hosts that read only the older one.
 */
const APP_TOOLS: ReadonlySet<string> = new Set(['room_read_posts', 'room_read_thread', 'room_post']);
const APP_META = { ui: { resourceUri: RESOURCE_URIS.app }, [RESOURCE_URI_META_KEY]: RESOURCE_URIS.app };

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
      ...(APP_TOOLS.has(tool.name) ? { _meta: APP_META } : {}),
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
    idempotencyInput: IDEMPOTENCY_ARGUMENT,
  };
}
