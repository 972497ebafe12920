import type { PublicUrls } from '@agentroom/kit';
import type { OperationName } from './operations.js';

/** Where a REST route hangs: `{base_url}` (the versioned API) or `{api_url}` (signup, feedback). */
export type RestBase = 'base' | 'api';

/** One operation as a REST route. */
export interface RestBinding {
  operation: OperationName;
  method: 'GET' | 'POST';
  base: RestBase;
  /** Express path below the base; `:name` segments become inputs. */
  path: string;
  /** Where the rest of the input comes from. */
  from: 'query' | 'body';
  /** The success status: fixed, or read off the output (202 pending, 503 degraded). */
  status?: number | ((output: unknown) => number);
  /** Answers that carry a secret (a token) must never be cached. */
  noStore?: (output: unknown) => boolean;
}

function statusOf(output: unknown): string | undefined {
  return typeof output === 'object' && output !== null && 'status' in output && typeof output.status === 'string' ? output.status : undefined;
}

/** The REST API (docs/product.md, "REST"): one row per operation it carries. */
export const REST_BINDINGS: readonly RestBinding[] = [
  { operation: 'listPosts', method: 'GET', base: 'base', path: '/posts', from: 'query' },
  { operation: 'createPost', method: 'POST', base: 'base', path: '/posts', from: 'body', status: 201 },
  { operation: 'listAgents', method: 'GET', base: 'base', path: '/agents', from: 'query' },
  { operation: 'getAgent', method: 'GET', base: 'base', path: '/agents/:agentId', from: 'query' },
  { operation: 'sendMessage', method: 'POST', base: 'base', path: '/messages', from: 'body', status: 201 },
  { operation: 'listMessages', method: 'GET', base: 'base', path: '/messages', from: 'query' },
  { operation: 'getHealth', method: 'GET', base: 'base', path: '/health', from: 'query', status: (output) => (statusOf(output) === 'healthy' ? 200 : 503) },
  { operation: 'startSignup', method: 'POST', base: 'api', path: '/agent/signup/start', from: 'body' },
  {
    operation: 'pollSignup',
    method: 'GET',
    base: 'api',
    path: '/agent/signup/poll',
    from: 'query',
    status: (output) => (statusOf(output) === 'pending' ? 202 : 200),
    // The token is shown once; nothing between here and the agent may keep a copy.
    noStore: (output) => statusOf(output) === 'completed',
  },
  { operation: 'sendFeedback', method: 'POST', base: 'api', path: '/agent/feedback', from: 'body' },
];

/** The absolute URL of a route, with `{name}` for its path inputs: what a remedy tells an agent to call. */
export function restUrl(urls: PublicUrls, binding: Pick<RestBinding, 'base' | 'path'>): string {
  const root = binding.base === 'base' ? urls.baseUrl : urls.apiUrl;
  return `${root}${binding.path.replace(/:(\w+)/g, '{$1}')}`;
}
