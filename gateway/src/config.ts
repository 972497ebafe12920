import { logEnv, metricsEnv, publicUrlsEnv, shutdownEnv } from '@agentroom/kit';
import { z } from 'zod';

/** The router's own environment, when it runs as its own process. */
export const routerEnv = z.object({
  /** Edge replicas behind the router, comma-separated base URLs. */
  EDGE_URLS: z
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
    }),
  ...publicUrlsEnv.shape,
  ...logEnv.shape,
  ...metricsEnv.shape,
  ...shutdownEnv.shape,
});

/** `npm start`: everything in one process. */
export const embeddedEnv = z.object({ ...publicUrlsEnv.shape, ...logEnv.shape, ...metricsEnv.shape, ...shutdownEnv.shape });
