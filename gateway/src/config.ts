import { cursorSecretEnv, logEnv, metricsEnv, publicUrlsEnv, shutdownEnv, storageEnv } from '@agentroom/kit';
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

export const routerEnv = z.object({
  /** Edge replicas behind the router. */
  EDGE_URLS: replicaUrls,
  /** Auth replicas (human pages) behind the router. */
  AUTH_URLS: replicaUrls,
  /** Edge's daily quota per client address: the router's own answers show it whole in their RateLimit headers. */
  QUOTA_PER_ADDRESS: z.coerce.number().int().min(1).max(1_000_000_000).default(5_000),
  ...publicUrlsEnv.shape,
  ...logEnv.shape,
  ...metricsEnv.shape,
  ...shutdownEnv.shape,
});

/**
 * `npm start`: everything in one process (storage and CURSOR_SECRET are checked here too, so a bad
 * value is told before anything starts).
 */
export const embeddedEnv = z.object({ ...publicUrlsEnv.shape, ...storageEnv.shape, ...logEnv.shape, ...metricsEnv.shape, ...shutdownEnv.shape, ...cursorSecretEnv.shape });
