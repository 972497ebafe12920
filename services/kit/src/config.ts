import { z } from 'zod';

/** Raised at boot when the environment does not fit the schema; the message names every bad variable. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/**
 * Parses the environment once, at boot, against a zod object schema.
 * Fails fast with one readable line per bad variable instead of running half-configured.
 */
export function loadConfig<S extends z.ZodType>(schema: S, env: NodeJS.ProcessEnv = process.env): z.output<S> {
  const parsed = schema.safeParse(env);
  if (parsed.success) return parsed.data;
  const lines = parsed.error.issues.map((issue) => {
    const name = issue.path.join('.') || '(environment)';
    const value = typeof issue.path[0] === 'string' ? env[issue.path[0]] : undefined;
    return `  ${name}${value === undefined ? '' : `=${JSON.stringify(value)}`}: ${issue.message}`;
  });
  throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`);
}

const absoluteUrl = z
  .url({ protocol: /^https?$/, message: 'must be an absolute http(s) URL' })
  .transform((url) => url.replace(/\/+$/, ''));

/** A TCP port; 0 asks the OS for a free one. */
export const port = z.coerce.number().int().min(0).max(65535);

/** `host:port` of a gRPC peer or listener. */
export const address = z.string().regex(/^[^\s:]+:\d{1,5}$/, 'must be host:port');

/**
 * The addresses every part of the product derives its URLs from (CONTRACT §1).
 * `SITE_URL` defaults to the local port; `API_URL` to `{site_url}/api`.
 */
export const publicUrlsEnv = z.object({
  PORT: port.default(8080),
  SITE_URL: absoluteUrl.optional(),
  API_URL: absoluteUrl.optional(),
});

export interface PublicUrls {
  siteUrl: string;
  apiUrl: string;
  baseUrl: string;
}

export function publicUrls(env: z.output<typeof publicUrlsEnv>): PublicUrls {
  const siteUrl = env.SITE_URL ?? `http://localhost:${env.PORT}`;
  const apiUrl = env.API_URL ?? `${siteUrl}/api`;
  return { siteUrl, apiUrl, baseUrl: `${apiUrl}/v1` };
}

export const logEnv = z.object({
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

/** Storage: Redis when `REDIS_URL` is set, the in-memory embedded default otherwise. */
export const storageEnv = z.object({
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'must start with redis:// or rediss://')
    .optional()
    .or(z.literal('').transform(() => undefined)),
  /** First segment of every key, so several deployments (or test runs) can share one Redis. */
  REDIS_KEY_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,32}$/, 'must be 1 to 32 letters, digits, - or _')
    .default('ar'),
});

/** Milliseconds a gRPC call may take before it fails with DEADLINE_EXCEEDED. */
export const grpcDeadlineEnv = z.object({
  GRPC_DEADLINE_MS: z.coerce.number().int().min(10).max(60_000).default(2_000),
});

/** How long graceful shutdown waits for in-flight work before forcing. */
export const shutdownEnv = z.object({
  SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).max(120_000).default(10_000),
});

export const metricsEnv = z.object({
  /** Port of the Prometheus `/metrics` listener; 0 picks a free port, unset turns it off. */
  METRICS_PORT: port.optional(),
});

/** For `main.ts` files: a bad environment prints the readable message and exits with status 2. */
export function loadConfigOrExit<S extends z.ZodType>(schema: S, service: string, env: NodeJS.ProcessEnv = process.env): z.output<S> {
  try {
    return loadConfig(schema, env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`${service}: ${error.message}\n`);
    process.exit(2);
  }
}

/** What every service reads: addresses, storage, logs, metrics, shutdown and gRPC deadlines. */
export const serviceEnv = z.object({
  ...publicUrlsEnv.shape,
  ...storageEnv.shape,
  ...logEnv.shape,
  ...metricsEnv.shape,
  ...shutdownEnv.shape,
  ...grpcDeadlineEnv.shape,
});
