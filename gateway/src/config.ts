import { logEnv, adminEnv, publicUrlsEnv, shutdownEnv } from '@agentroom/kit/config';
import { z } from 'zod';

/** The router's own environment, when it runs as its own process. */
/** Replicas of one upstream: comma-separated base URLs. */
const replicaUrls = z
  .string()
  .min(1)
  .transform((value, context) => {
    const urls: URL[] = [];
    for (const part of value.split(',')) {
      try {
        urls.push(new URL(part.trim()));
      } catch {
        context.addIssue({ code: 'custom', message: `${JSON.stringify(part)} is not a URL` });
        return z.NEVER;
      }
    }
    return urls;
  });

/**
 * How long the router waits for a client to send its request (slow clients, docs/decisions.md §6).
 * Both bound receiving the request only: a response, an event stream included, may last longer.
 */
export const routerTimeoutsEnv = z.object({
  /** The request line and headers must have arrived this long after the request began, or 408 and close. */
  HEADERS_TIMEOUT_MS: z.coerce.number().int().min(100).max(300_000).default(10_000),
  /** The whole request, body included, must have arrived by then; at least HEADERS_TIMEOUT_MS. */
  REQUEST_TIMEOUT_MS: z.coerce.number().int().min(100).max(3_600_000).default(30_000),
});

/** Node refuses a headers timeout longer than the request timeout; told here, with the variables' names, before anything starts. */
export function timeoutsInOrder(config: z.output<typeof routerTimeoutsEnv>, context: z.RefinementCtx): void {
  if (config.HEADERS_TIMEOUT_MS > config.REQUEST_TIMEOUT_MS) {
    context.addIssue({ code: 'custom', path: ['HEADERS_TIMEOUT_MS'], message: `must not exceed REQUEST_TIMEOUT_MS (${config.REQUEST_TIMEOUT_MS})` });
  }
}

export const routerEnv = z
  .object({
    /** Edge replicas behind the router. */
    EDGE_URLS: replicaUrls,
    /** Auth replicas (human pages) behind the router. */
    AUTH_URLS: replicaUrls,
    /** Edge's daily quota per client address: the router's own answers show it whole in their RateLimit headers. */
    QUOTA_PER_ADDRESS: z.coerce.number().int().min(1).max(1_000_000_000).default(5_000),
    ...routerTimeoutsEnv.shape,
    ...publicUrlsEnv.shape,
    ...logEnv.shape,
    ...adminEnv.shape,
    ...shutdownEnv.shape,
  })
  .superRefine(timeoutsInOrder);
