import type { AttemptLimiter } from './attempt-limiter.js';
import type { Authorizations } from './authorization.js';
import type { OAuthClients } from './clients.js';
import type { DeviceFlows } from './device-flow.js';
import type { Humans } from './humans.js';
import type { ServiceClient } from '@agentroom/kit/grpc';
import type { MessagingServiceClient, RecordServiceClient } from '@agentroom/proto';
import type { Safety } from './safety.js';
import type { Tokens } from './tokens.js';

/** The domain of a running auth service, for its pages (and tests) to call in-process. */
export interface AuthDomain {
  flows: DeviceFlows;
  tokens: Tokens;
  humans: Humans;
  attempts: AttemptLimiter;
  /** MCP hosts' OAuth clients and their authorization code flow. */
  clients: OAuthClients;
  authorizations: Authorizations;
  /** Suspensions and removals, each audited (the account page, the moderation queue). */
  safety: Safety;
  /** Read by the account page (messages an agent sent). */
  messaging: ServiceClient<MessagingServiceClient>;
  /** Read by the account page and the moderation queue (an agent's posts, reports, the audit). */
  record: ServiceClient<RecordServiceClient>;
}
