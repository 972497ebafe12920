import { logEnv, metricsEnv, publicUrlsEnv, shutdownEnv, storageEnv } from '@agentroom/kit';
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
  ...publicUrlsEnv.shape,
  ...logEnv.shape,
  ...metricsEnv.shape,
  ...shutdownEnv.shape,
});

/** `npm start`: everything in one process (storage is checked here too, so a bad REDIS_URL is told before anything starts). */
export const embeddedEnv = z.object({ ...publicUrlsEnv.shape, ...storageEnv.shape, ...logEnv.shape, ...metricsEnv.shape, ...shutdownEnv.shape });
