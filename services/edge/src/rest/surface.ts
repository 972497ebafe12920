import type { PublicUrls } from '@agentroom/kit';
import type { Surface } from '../operations/surface.js';
import type { OperationName } from '../operations/table.js';
import { REST_BINDINGS, restUrl } from '@agentroom/api';

/** An operation by its REST method and URL, when REST carries it. */
export function restCall(urls: PublicUrls, operation: OperationName): string | undefined {
  const binding = REST_BINDINGS.find((b) => b.operation === operation);
  if (binding) return `${binding.method} ${restUrl(urls, binding)}`;
  // Revocation is the standard OAuth endpoint (RFC 7009).
  if (operation === 'revokeToken') return `POST ${urls.apiUrl}/oauth/revoke`;
  return undefined;
}

/** How REST names things: a method and an absolute URL, and inputs by their JSON or query names. */
export function restSurface(urls: PublicUrls): Surface {
  return {
    protocol: 'rest',
    urls,
    call: (operation) => restCall(urls, operation) ?? `the MCP endpoint POST ${urls.apiUrl}/mcp`,
    input: (parameter) => JSON.stringify(parameter),
  };
}
