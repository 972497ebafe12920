// The Envoy side of the gateway, for launchers that put Envoy in front of their processes
// (`npm run cluster -- --envoy`): the documents' files and the bootstrap that serves them.
import { z } from 'zod';
import { routerTimeoutsEnv, timeoutsInOrder } from './config.js';

export { writeDocuments, documentFileName } from './document-files.js';
export { envoyBootstrap, envoyYaml, ENVOY_DEFAULTS, type Endpoint, type EnvoyOptions } from './envoy.js';
export { discoveryDocuments } from './discovery.js';

/** What Envoy in front reads from the environment, as the router would: the quota its own answers show, and how long a client may take to send its request. */
export const envoyEnv = z
  .object({
    QUOTA_PER_ADDRESS: z.coerce.number().int().min(1).max(1_000_000_000).default(5_000),
    ...routerTimeoutsEnv.shape,
  })
  .superRefine(timeoutsInOrder);
