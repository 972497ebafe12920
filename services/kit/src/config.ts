import { z } from 'zod';
import { CURSOR_SECRET_MIN_BYTES } from './http/paging.js';
import { LIMIT_MAX } from './limits.js';
import { defaultLogFormat, LOG_FORMATS } from './log.js';

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
    // A secret is never printed back, not even a wrong one.
    const shown = value === undefined || SECRET_VARIABLES.has(name) ? '' : `=${JSON.stringify(withoutPassword(value))}`;
    return `${name}${shown}: ${issue.message}`;
  });
  // One bad variable, one line; several, one line each.
  throw new ConfigError(lines.length === 1 ? `invalid configuration: ${lines[0]}` : `invalid configuration:\n${lines.map((line) => `  ${line}`).join('\n')}`);
}

/** Variables whose values a configuration error does not repeat. */
const SECRET_VARIABLES = new Set(['CURSOR_SECRET']);

/** A URL's password is never printed back (a REDIS_URL may carry one). */
export function withoutPassword(value: string): string {
  try {
    const url = new URL(value);
    if (url.password === '') return value;
    url.password = '***';
    return url.href;
  } catch {
    // Not a URL to the parser (a bad port…), yet it may still hold `scheme://user:password@`.
    return value.replace(/^([a-z][a-z\d+.-]*:\/\/[^:@/]*:).*@/i, '$1***@');
  }
}

const absoluteUrl = z.url({ protocol: /^https?$/, message: 'must be an absolute http(s) URL' }).transform((url) => url.replace(/\/+$/, ''));

/** A TCP port; 0 asks the OS for a free one. */
export const port = z.coerce.number().int().min(0).max(65535);

/** `host:port` of a gRPC peer or listener. */
export const address = z.string().regex(/^[^\s:]+:\d{1,5}$/, 'must be host:port');

/**
 * Where a gRPC client dials: `host:port`, or a gRPC target naming its resolver, as Kubernetes
 * deployments do (`dns:///room-headless:50051`: every pod behind a headless Service; or
 * `dns://<dns server>/<name>:<port>`, `ipv4:10.0.0.1:50051,10.0.0.2:50051`).
 */
export const grpcTarget = z
  .string()
  .regex(
    /^(?:(?:dns:(?:\/\/[^\s/]*\/)?)?[^\s:/]+:\d{1,5}|ipv4:[\d.]+:\d{1,5}(?:,[\d.]+:\d{1,5})*)$/,
    'must be host:port, or a gRPC target such as dns:///room-headless:50051',
  );

/**
 * The addresses every part of the product derives its URLs from (docs/decisions.md §1).
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
  /** `json` for machines, `pretty` (a readable line each) for people; pretty when stdout is a terminal. */
  LOG_FORMAT: z.enum(LOG_FORMATS).default(() => defaultLogFormat()),
});

const REDIS_URL_HINT =
  'use one like redis://127.0.0.1:6379, rediss://:password@host:6380/0 or (a Redis Cluster) redis+cluster://:password@10.0.0.1:6379,10.0.0.2:6379, or unset REDIS_URL for in-memory storage';

/** A Redis URL ioredis will connect to as written: scheme, a host, a numeric port, at most a database number. */
const redisUrl = z.string().superRefine((value, context) => {
  const problem = redisUrlProblem(value);
  if (problem !== undefined) context.addIssue({ code: 'custom', message: `${problem}: ${REDIS_URL_HINT}` });
});

/**
 * A Redis Cluster, as `redis+cluster://[:password@]host:port,host:port`: some of its nodes (the
 * client finds the rest), and the password every node shares. Undefined for a plain Redis URL.
 */
export function redisClusterNodes(value: string): { nodes: { host: string; port: number }[]; username?: string; password?: string } | undefined {
  const match = /^redis\+cluster:\/\/(?:([^:@/]*)(?::([^@/]*))?@)?([^/]+?)\/?$/.exec(value);
  if (!match) return undefined;
  const nodes = (match[3] ?? '').split(',').map((node) => {
    const parts = /^([^:\s,]+):(\d{1,5})$/.exec(node.trim());
    return parts ? { host: parts[1] as string, port: Number(parts[2]) } : undefined;
  });
  if (nodes.length === 0 || nodes.some((node) => node === undefined || node.port < 1 || node.port > 65_535)) return undefined;
  return {
    nodes: nodes as { host: string; port: number }[],
    ...(match[1] ? { username: decodeURIComponent(match[1]) } : {}),
    ...(match[2] !== undefined ? { password: decodeURIComponent(match[2]) } : {}),
  };
}

function redisUrlProblem(value: string): string | undefined {
  if (value.startsWith('redis+cluster://')) {
    return redisClusterNodes(value) === undefined
      ? 'names a Redis Cluster as redis+cluster://[:password@]host:port,host:port (every node with its port)'
      : undefined;
  }
  if (!/^rediss?:\/\//.test(value)) return 'must start with redis://, rediss:// or redis+cluster://';
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'is not a valid URL (is the port a number? are special characters of the password %-encoded?)';
  }
  if (url.hostname === '') return 'names no host';
  if (!/^\/?(\d+)?$/.test(url.pathname)) return `has path ${JSON.stringify(url.pathname)}: only a database number may follow the host`;
  return undefined;
}

/** Storage: Redis when `REDIS_URL` is set, the in-memory embedded default otherwise. */
export const storageEnv = z.object({
  REDIS_URL: redisUrl.optional().or(z.literal('').transform(() => undefined)),
  /** First segment of every key, so several deployments (or test runs) can share one Redis. */
  REDIS_KEY_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,32}$/, 'must be 1 to 32 letters, digits, - or _')
    .default('ar'),
  /**
   * Replicas that must have a post or direct message before it is acknowledged (Redis `WAIT`,
   * docs/decisions.md §20); unset: 1 when the Redis has replicas when the service starts, else 0 (no wait).
   */
  REDIS_WAIT_REPLICAS: z.coerce.number().int().min(0).max(5).optional(),
  /** How long such a write waits for them before it is answered anyway (and counted). */
  REDIS_WAIT_TIMEOUT_MS: z.coerce.number().int().min(1).max(10_000).default(250),
});

/** GRPC_DEADLINE_MS when it is not set. */
export const GRPC_DEADLINE_DEFAULT_MS = 2_000;

/** Milliseconds a gRPC call may take before it fails with DEADLINE_EXCEEDED. */
export const grpcDeadlineEnv = z.object({
  GRPC_DEADLINE_MS: z.coerce.number().int().min(10).max(60_000).default(GRPC_DEADLINE_DEFAULT_MS),
});

/** How long graceful shutdown waits for in-flight work before forcing. */
export const shutdownEnv = z.object({
  SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).max(120_000).default(10_000),
  /**
   * After SIGTERM, how long the process keeps serving with readiness false before it closes its
   * listeners: the time balancers need to stop sending (Kubernetes endpoints, Envoy health checks).
   * 0 locally; the Helm chart sets a few seconds.
   */
  SHUTDOWN_DELAY_MS: z.coerce.number().int().min(0).max(60_000).default(0),
});

export const adminEnv = z.object({
  /** The admin port: Prometheus `/metrics` and the probes `/livez` and `/readyz`; 0 picks a free port, unset turns it off. */
  ADMIN_PORT: port.optional(),
});

/**
 * The key cursors are signed with (docs/decisions.md §6), at least 32 bytes; the same in every
 * process of a deployment. Unset, a service draws a random one at start.
 */
export const cursorSecretEnv = z.object({
  CURSOR_SECRET: z
    .string()
    .refine(
      (value) => Buffer.byteLength(value, 'utf8') >= CURSOR_SECRET_MIN_BYTES,
      `must be at least ${CURSOR_SECRET_MIN_BYTES} bytes (openssl rand -base64 32 makes one), or unset for a random one per start`,
    )
    .optional(),
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
  ...adminEnv.shape,
  ...shutdownEnv.shape,
  ...grpcDeadlineEnv.shape,
});

/**
 * How many of the newest posts the room keeps, in memory or in Redis (docs/decisions.md §19); 0 keeps
 * every post. Room and edge read the same variable (edge keeps at most half as many in memory, so
 * every post it answers is one the room still holds), so both take it from here. At least a full
 * page, so an edge's first page never shows a post the room let go.
 */
export const postsRetentionEnv = z.object({
  POSTS_RETENTION: z.coerce
    .number()
    .int()
    .refine((n) => n === 0 || n >= LIMIT_MAX, `must be 0 (keep every post) or a whole number of at least ${LIMIT_MAX} (a full page)`)
    .default(100_000),
});
