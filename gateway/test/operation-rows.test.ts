import { readFileSync } from 'node:fs';
import {
  isMcpTool,
  isOAuthEndpoint,
  isRestRoute,
  LIVE_FEED_NAMES,
  LIVE_FEEDS,
  MCP_TOOL_OPERATIONS,
  type OperationName,
  OPERATIONS,
  REST_BINDINGS,
} from '@agentroom/api';
import { describe, expect, it } from 'vitest';

/**
 * Adding an operation is one row: the row carries its REST route (or the OAuth endpoint it is, or
 * why it has none) and its MCP tool (or why it has none), which the type checker demands; this
 * suite demands the rest a newcomer relies on: that the hand-written docs name what the row adds.
 */
const product = readFileSync(new URL('../../docs/product.md', import.meta.url), 'utf8');
const mcpPage = readFileSync(new URL('../../docs/mcp-and-a2a.md', import.meta.url), 'utf8');
const names = Object.keys(OPERATIONS) as OperationName[];

describe('every operation row', () => {
  it.each(names)('%s says what it does, and how REST and MCP carry it (or why they do not)', (name) => {
    const row = OPERATIONS[name];
    expect(row.title.length).toBeGreaterThan(3);
    expect(row.description.length).toBeGreaterThan(20);
    if (!isRestRoute(row.rest) && !isOAuthEndpoint(row.rest)) expect(row.rest.none.length, `${name}: why REST does not carry it`).toBeGreaterThan(10);
    if (!isMcpTool(row.mcp)) expect(row.mcp.none.length, `${name}: why MCP does not carry it`).toBeGreaterThan(10);
  });

  it.each(REST_BINDINGS.map((binding) => [binding.operation, binding] as const))('%s: docs/product.md lists its route', (name, binding) => {
    const path = `${binding.base === 'base' ? '{base_url}' : '{api_url}'}${binding.path.replace(/:(\w+)/g, '{$1}')}`;
    expect(product, `docs/product.md names ${binding.method} ${path} in the row of ${name}`).toMatch(
      new RegExp(`\\| ${name} \\| \`${binding.method} ${path.replace(/[{}]/g, '\\$&')}`),
    );
  });

  it.each(Object.entries(MCP_TOOL_OPERATIONS))('%s: docs/product.md and docs/mcp-and-a2a.md list the tool', (tool) => {
    expect(product).toContain(`| \`${tool}\` |`);
    expect(mcpPage).toContain(`| \`${tool}\` |`);
  });

  it.each(LIVE_FEED_NAMES)('the %s feed: docs/product.md lists it under "Live feeds", with its scope and event', (name) => {
    const feed = LIVE_FEEDS[name];
    const section = product.slice(product.indexOf('## Live feeds'), product.indexOf('\n## ', product.indexOf('## Live feeds') + 1)).replace(/\s+/g, ' ');
    const line = new RegExp(
      `- \`GET \\{base_url\\}${feed.path}\`: [^;]*?${feed.scope === undefined ? 'no token' : `scope \`${feed.scope}\``}[^;]*?, \`event: ${feed.event}\``,
    );
    expect(section, `docs/product.md, "Live feeds": GET {base_url}${feed.path}`).toMatch(line);
  });

  it('keeps tool names unique and REST routes unique per method', () => {
    expect(new Set(Object.keys(MCP_TOOL_OPERATIONS)).size).toBe(names.filter((name) => isMcpTool(OPERATIONS[name].mcp)).length);
    const routes = REST_BINDINGS.map((b) => `${b.method} ${b.base} ${b.path}`);
    expect(new Set(routes).size).toBe(routes.length);
  });
});
