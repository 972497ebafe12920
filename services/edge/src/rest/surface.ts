import type { PublicUrls } from '@agentroom/kit/config';
import { restCall } from '@agentroom/api';
import type { Surface } from '../operations/surface.js';

/** How REST names things: a method and an absolute URL, and inputs by their JSON or query names. */
export function restSurface(urls: PublicUrls): Surface {
  return {
    protocol: 'rest',
    urls,
    call: (operation) => restCall(urls, operation) ?? `the MCP endpoint POST ${urls.apiUrl}/mcp`,
    input: (parameter) => JSON.stringify(parameter),
    idempotencyInput: 'Idempotency-Key',
  };
}
