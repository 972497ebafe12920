// The Envoy side of the gateway, for launchers that put Envoy in front of their processes
// (`npm run cluster -- --envoy`): the documents' files and the bootstrap that serves them.
import { z } from 'zod';
import { routerTimeoutsEnv, timeoutsInOrder } from './config.js';
import { ENVOY_DEFAULTS } from './envoy.js';

export { writeDocuments, documentFileName } from './document-files.js';
export {
  CHART_ENVOY_TRACING_FILE,
  envoyBootstrap,
  envoyYaml,
  ENVOY_DEFAULTS,
  fillChartPlaceholders,
  type Endpoint,
  type EnvoyOptions,
  type EnvoyTracing,
} from './envoy.js';
export { discoveryDocuments } from './discovery.js';
export { envoyTracing, tracingEnv } from './tracing.js';

/**
 * What Envoy in front reads from the environment: as the router would, the quota its own answers
 * show and how long a client may take to send its request; and its coarse guard, the requests a
 * second it takes from everyone together before it answers 429 (`npm run bench` raises it, to
 * measure the services rather than the guard).
 */
export const envoyEnv = z
  .object({
    QUOTA_PER_ADDRESS: z.coerce.number().int().min(1).max(1_000_000_000).default(5_000),
    ENVOY_RATE_LIMIT_PER_SECOND: z.coerce.number().int().min(1).max(1_000_000_000).default(ENVOY_DEFAULTS.rateLimit.perSecond),
    ENVOY_RATE_LIMIT_BURST: z.coerce.number().int().min(1).max(1_000_000_000).default(ENVOY_DEFAULTS.rateLimit.burst),
    ...routerTimeoutsEnv.shape,
  })
  .superRefine(timeoutsInOrder);
