import { cursorSecretEnv, logEnv, adminEnv, publicUrlsEnv, shutdownEnv, storageEnv } from '@agentroom/kit/config';
import { routerTimeoutsEnv, timeoutsInOrder } from '@agentroom/gateway';
import { z } from 'zod';

/**
 * `npm start`: everything in one process (storage and CURSOR_SECRET are checked here too, so a bad
 * value is told before anything starts).
 */
export const embeddedEnv = z
  .object({
    ...routerTimeoutsEnv.shape,
    ...publicUrlsEnv.shape,
    ...storageEnv.shape,
    ...logEnv.shape,
    ...adminEnv.shape,
    ...shutdownEnv.shape,
    ...cursorSecretEnv.shape,
  })
  .superRefine(timeoutsInOrder);
