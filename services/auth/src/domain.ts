import type { AttemptLimiter } from './attempt-limiter.js';
import type { DeviceFlows } from './device-flow.js';
import type { Humans } from './humans.js';
import type { Tokens } from './tokens.js';

/** The domain of a running auth service, for its pages (and tests) to call in-process. */
export interface AuthDomain {
  flows: DeviceFlows;
  tokens: Tokens;
  humans: Humans;
  attempts: AttemptLimiter;
}
