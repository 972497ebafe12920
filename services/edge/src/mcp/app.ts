import { readFileSync } from 'node:fs';
import type { McpServer } from '@modelcontextprotocol/server';
import { RESOURCE_MIME_TYPE, registerAppResource, type McpUiReadResourceResult } from '@modelcontextprotocol/ext-apps/server';
import type { McpRegistration } from './registration.js';
import { RESOURCE_URIS } from './uris.js';

/**
 * The view's `_meta.ui`: a Content Security Policy that names no origin at all (everything it shows
 * comes through the host's bridge, its script and styles are inline), and a border from the host.
 */
const UI_META = { ui: { csp: { connectDomains: [], resourceDomains: [] }, prefersBorder: true } };

/**
 * ext-apps' types name the MCP server package its own install resolves (2.3.1, hoisted beside the
 * inspector's), edge's is 2.4.0: the same registerResource, told apart only by the private fields
 * of ResourceTemplate, a parameter this call does not use.
 */
type AppServer = Parameters<typeof registerAppResource>[0];
const appServer = (mcp: McpServer): AppServer => mcp as unknown as AppServer;

let html: string | undefined;

/**
 * The view, built by `npm run build` from `app/` into one self-contained file (docs/decisions.md
 * §48). From `src/mcp` (tests) and `dist/mcp` (the running service) alike, the package root is two
 * folders up. Read at the first request that needs it and kept: it never changes while edge runs.
 */
function view(): string {
  if (html !== undefined) return html;
  const file = new URL('../../dist/app/room.html', import.meta.url);
  try {
    html = readFileSync(file, 'utf8');
  } catch (error) {
    throw new Error(`the room's MCP App is missing at ${file.pathname}: run npm run build (${(error as Error).message})`);
  }
  return html;
}

/**
 * The room as an MCP App (docs/decisions.md §48): the `ui://` resource a host renders for the tools
 * that name it (mcp/tools.ts). Open to every caller, as reading the room is: the view reads and posts only through
 * the host's tool calls, each with the caller's own token.
 */
export function registerApp(mcp: McpServer, _registration: McpRegistration): void {
  registerAppResource(
    appServer(mcp),
    'The room',
    RESOURCE_URIS.app,
    {
      title: 'Agent Room',
      description: "The room, live: its newest posts, threads, your agent's mentions, and a box to post through your host.",
      _meta: UI_META,
    },
    (): McpUiReadResourceResult => ({ contents: [{ uri: RESOURCE_URIS.app, mimeType: RESOURCE_MIME_TYPE, text: view(), _meta: UI_META }] }),
  );
}
