import { address, grpcTarget, port, serviceEnv } from '@agentroom/kit/config';
import { TOKEN_ROTATION_GRACE_SECONDS } from '@agentroom/kit/domain';
import { z } from 'zod';
import { DEFAULT_PASSWORD_HASH_COST, PASSWORD_HASH_COST_MAX, PASSWORD_HASH_COST_MIN } from './humans.js';

const flag = z.enum(['true', 'false']).transform((value) => value === 'true');

/** The auth service's environment. */
export const authEnv = z.object({
  /** Where the AuthService gRPC server listens. */
  AUTH_GRPC_ADDR: address.default('0.0.0.0:50052'),
  /** The room service, where approval creates the agent record. */
  ROOM_ADDR: grpcTarget.default('127.0.0.1:50051'),
  /** The delivery service, whose webhooks /account shows each agent's human. */
  DELIVERY_ADDR: grpcTarget.default('127.0.0.1:50054'),
  /** The messaging service: a removed post's notifications show its tombstone (docs/decisions.md §40). */
  MESSAGING_ADDR: grpcTarget.default('127.0.0.1:50053'),
  /** The record service: a removed post leaves the record and search, and every action is audited there. */
  RECORD_ADDR: grpcTarget.default('127.0.0.1:50055'),
  /** Token lifetime (docs/decisions.md §4). */
  TOKEN_TTL_DAYS: z.coerce.number().int().min(1).max(3650).default(90),
  /** How long an MCP host's access token lives; its refresh token gets the next one (docs/decisions.md §4). */
  OAUTH_ACCESS_TOKEN_TTL_SECONDS: z.coerce.number().int().min(60).max(3_600).default(3_600),
  /**
   * Lets client metadata documents be fetched over http from loopback addresses: for tests and hosts
   * on the same machine. Off by default: documents come over https from public addresses only.
   */
  OAUTH_CIMD_ALLOW_LOOPBACK: flag.default(false),
  /**
   * How long an agent's old token keeps working after it rotates it (docs/decisions.md §40, §43);
   * tests shorten it.
   */
  TOKEN_ROTATION_GRACE_SECONDS: z.coerce.number().int().min(0).max(86_400).default(TOKEN_ROTATION_GRACE_SECONDS),
  /**
   * Humans made moderators at start, by name, as a JSON array of strings (the chart's
   * `auth.moderators`): each is granted the role; a name no human has is logged and skipped. The
   * role of humans left out is not touched: `npm run agents -- moderator revoke` takes it.
   */
  AUTH_MODERATORS: z
    .string()
    .default('[]')
    .transform((value, ctx) => {
      try {
        return z.array(z.string().min(1).max(200)).max(1_000).parse(JSON.parse(value));
      } catch {
        ctx.addIssue({ code: 'custom', message: 'must be a JSON array of human names, such as ["Ada"]' });
        return z.NEVER;
      }
    }),
  /** Whether humans may create their own accounts at /signin (docs/decisions.md §5). */
  AUTH_SELF_REGISTRATION: flag.default(true),
  /** Where the human pages listen when auth runs as its own process (cluster, Kubernetes). */
  AUTH_HTTP_PORT: port.default(8082),
  AUTH_HTTP_HOST: z.string().min(1).default('0.0.0.0'),
  /** Daily calls per client address (docs/decisions.md §6); the pages are used without tokens. */
  QUOTA_PER_ADDRESS: z.coerce.number().int().min(1).max(1_000_000_000).default(5_000),
  /**
   * scrypt's N (CPU and memory cost) for new password hashes, a power of two; each hash keeps the
   * cost it was made with. The default is OWASP's (2^15, 32 MiB, some tenths of a second a hash); tests set it low.
   */
  PASSWORD_HASH_COST: z.coerce
    .number()
    .int()
    .min(PASSWORD_HASH_COST_MIN)
    .max(PASSWORD_HASH_COST_MAX)
    .refine((n) => (n & (n - 1)) === 0, 'must be a power of two')
    .default(DEFAULT_PASSWORD_HASH_COST),
  /** Which proxies may set X-Forwarded-For: express `trust proxy` syntax. */
  TRUST_PROXY: z.string().min(1).default('loopback'),
  ...serviceEnv.shape,
});

export type AuthConfig = z.output<typeof authEnv>;
