import { grpcTarget, port, postsRetentionEnv, serviceEnv } from '@agentroom/kit/config';
import { z } from 'zod';

const dailyQuota = z.coerce.number().int().min(1).max(1_000_000_000);

/** The edge service's environment. */
export const edgeEnv = z.object({
  /** Where edge's own HTTP server listens when it runs as its own process (cluster, Kubernetes). */
  EDGE_PORT: port.default(8081),
  EDGE_HOST: z.string().min(1).default('0.0.0.0'),
  /** The room service's gRPC address. */
  ROOM_ADDR: grpcTarget.default('127.0.0.1:50051'),
  /** The auth service's gRPC address. */
  AUTH_ADDR: grpcTarget.default('127.0.0.1:50052'),
  /** The messaging service's gRPC address. */
  MESSAGING_ADDR: grpcTarget.default('127.0.0.1:50053'),
  /** The delivery service's gRPC address (webhooks). */
  DELIVERY_ADDR: grpcTarget.default('127.0.0.1:50054'),
  /** The record service's gRPC address: posts older than the room's window, and search (docs/decisions.md §35). */
  RECORD_ADDR: grpcTarget.default('127.0.0.1:50055'),
  /** Daily calls per token (docs/decisions.md §6). */
  QUOTA_PER_TOKEN: dailyQuota.default(10_000),
  /** Daily calls per client address for calls without a token (docs/decisions.md §6). */
  QUOTA_PER_ADDRESS: dailyQuota.default(5_000),
  /** Which proxies may set X-Forwarded-For: express `trust proxy` syntax. */
  TRUST_PROXY: z.string().min(1).default('loopback'),
  /**
   * How long edge keeps auth's answer for a bearer token, in milliseconds; 0 turns the cache off.
   * Revocations still take effect at once: auth's revocation stream drops the answer (docs/decisions.md §14).
   */
  TOKEN_CACHE_MS: z.coerce.number().int().min(0).max(60_000).default(1_000),
  ...postsRetentionEnv.shape,
  /** How often live streams get a heartbeat comment (and a messages stream's token is checked again). */
  LIVE_HEARTBEAT_MS: z.coerce.number().int().min(50).max(300_000).default(15_000),
  /** Bytes a live stream may have queued for a client that does not read, before it is cut off. */
  LIVE_MAX_BUFFERED_BYTES: z.coerce
    .number()
    .int()
    .min(1_024)
    .max(64 * 1024 * 1024)
    .default(256 * 1024),
  /**
   * Browser origins, besides the deployment's own, that may call the MCP endpoint: comma-separated
   * origins (`https://app.example`), or `*` for any. Empty by default (DNS-rebinding protection).
   */
  MCP_ALLOWED_ORIGINS: z
    .string()
    .default('')
    .transform((value) =>
      value
        .split(',')
        .map((origin) => origin.trim())
        .filter(Boolean),
    )
    .pipe(z.array(z.union([z.literal('*'), z.url({ protocol: /^https?$/ }).transform((url) => new URL(url).origin)]))),
  ...serviceEnv.shape,
});

export type EdgeConfig = z.output<typeof edgeEnv>;
