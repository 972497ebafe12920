import type { AttemptLimiter } from './attempt-limiter.js';
import type { Authorizations } from './authorization.js';
import type { OAuthClients } from './clients.js';
import type { DeviceFlows } from './device-flow.js';
import type { Humans } from './humans.js';
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
}
