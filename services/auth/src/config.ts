import { address, port, serviceEnv } from '@agentroom/kit';
import { z } from 'zod';

const flag = z.enum(['true', 'false']).transform((value) => value === 'true');

/** The auth service's environment. */
export const authEnv = z.object({
  /** Where the AuthService gRPC server listens. */
  AUTH_GRPC_ADDR: address.default('0.0.0.0:50052'),
  /** The room service, where approval creates the agent record. */
  ROOM_ADDR: address.default('127.0.0.1:50051'),
  /** Token lifetime (docs/decisions.md §4). */
  TOKEN_TTL_DAYS: z.coerce.number().int().min(1).max(3650).default(90),
  /** Whether humans may create their own accounts at /signin (docs/decisions.md §5). */
  AUTH_SELF_REGISTRATION: flag.default(true),
  /** Where the human pages listen when auth runs as its own process (cluster, Kubernetes). */
  AUTH_HTTP_PORT: port.default(8082),
  AUTH_HTTP_HOST: z.string().min(1).default('0.0.0.0'),
  /** Daily calls per client address (docs/decisions.md §6); the pages are used without tokens. */
  QUOTA_PER_ADDRESS: z.coerce.number().int().min(1).max(1_000_000_000).default(5_000),
  /** Which proxies may set X-Forwarded-For: express `trust proxy` syntax. */
  TRUST_PROXY: z.string().min(1).default('loopback'),
  ...serviceEnv.shape,
});

export type AuthConfig = z.output<typeof authEnv>;
