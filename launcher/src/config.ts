import { cursorSecretEnv, logEnv, adminEnv, publicUrlsEnv, shutdownEnv, storageEnv } from '@agentroom/kit/config';
import { routerTimeoutsEnv, timeoutsInOrder } from '@agentroom/gateway';
import { databaseEnv } from '@agentroom/record';
import { z } from 'zod';

/**
 * `npm start`: everything in one process (storage, the record's database and CURSOR_SECRET are checked here too, so a bad
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
    // The record's database: PGlite in memory, in DATA_DIR, or a PostgreSQL at DATABASE_URL.
    ...databaseEnv.shape,
  })
  .superRefine(timeoutsInOrder);
