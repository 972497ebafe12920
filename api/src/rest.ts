import type { PublicUrls } from '@agentroom/kit/config';
import { isOAuthEndpoint, isRestRoute, type RestBase, type RestRoute } from './carriage.js';
import { type OperationName, OPERATIONS } from './operations.js';

export type { RestBase };

/** One operation as a REST route: the route on its row, with the row's name. */
export interface RestBinding extends RestRoute {
  operation: OperationName;
}

const NAMES = Object.keys(OPERATIONS) as OperationName[];

/** The REST API (docs/product.md, "REST"), read off the rows that carry a route, in the table's order. */
export const REST_BINDINGS: readonly RestBinding[] = NAMES.flatMap((operation) => {
  const carriage = OPERATIONS[operation].rest;
  return isRestRoute(carriage) ? [{ operation, ...carriage }] : [];
});

/** The absolute URL of a route, with `{name}` for its path inputs: what a remedy tells an agent to call. */
export function restUrl(urls: PublicUrls, binding: Pick<RestBinding, 'base' | 'path'>): string {
  const root = binding.base === 'base' ? urls.baseUrl : urls.apiUrl;
  return `${root}${binding.path.replace(/:(\w+)/g, '{$1}')}`;
}

/** An operation by its HTTP method and URL, when a REST route or a standard OAuth endpoint carries it. */
export function restCall(urls: PublicUrls, operation: OperationName): string | undefined {
  const carriage = OPERATIONS[operation].rest;
  if (isRestRoute(carriage)) return `${carriage.method} ${restUrl(urls, carriage)}`;
  if (isOAuthEndpoint(carriage)) return `POST ${urls.apiUrl}${carriage.oauth}`;
  return undefined;
}
