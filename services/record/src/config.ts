import { address, cursorSecretEnv, grpcTarget, serviceEnv } from '@agentroom/kit/config';
import { z } from 'zod';

const POSTGRES_URL_HINT = 'use one like postgres://user:password@host:5432/agentroom, or unset it for PGlite in this process';

/** A PostgreSQL connection URL as `pg` reads it: postgres:// or postgresql://, with a host. */
const postgresUrl = z.string().superRefine((value, context) => {
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    context.addIssue({
      code: 'custom',
      message: `is not a valid URL (is the port a number? are special characters of the password %-encoded?): ${POSTGRES_URL_HINT}`,
    });
    return;
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:')
    context.addIssue({ code: 'custom', message: `must start with postgres:// or postgresql://: ${POSTGRES_URL_HINT}` });
  else if (url.hostname === '') context.addIssue({ code: 'custom', message: `names no host: ${POSTGRES_URL_HINT}` });
});

/** An optional variable, where set-but-empty reads as unset (a chart or a shell leaves it so). */
function unsetWhenEmpty<T extends z.ZodType<string>>(schema: T) {
  return schema.optional().or(z.literal('').transform(() => undefined));
}

/**
 * Where the record keeps every post: a PostgreSQL (`DATABASE_URL`, with an optional read replica for
 * reads and search), or PGlite in this process, in a folder (`DATA_DIR`) or in memory. The launchers
 * check the same variables before they start anything.
 */
export const databaseEnv = z.object({
  /** A PostgreSQL 15 or newer; unset: PGlite in this process. */
  DATABASE_URL: unsetWhenEmpty(postgresUrl),
  /** A read replica of it, for reads and search (the follower always writes to DATABASE_URL). */
  DATABASE_READ_URL: unsetWhenEmpty(postgresUrl),
  /** PGlite's folder (created if missing), so the record outlives a restart; unset: in memory. Not read with DATABASE_URL. */
  DATA_DIR: unsetWhenEmpty(z.string().min(1)),
  /** Days a post is kept in the record; 0 keeps every post forever. */
  RECORD_RETENTION_DAYS: z.coerce
    .number({ message: 'must be a whole number of days, or 0 to keep every post' })
    .int('must be a whole number of days, or 0 to keep every post')
    .min(0, 'must be 0 (keep every post) or a number of days')
    .max(36_500, 'must be at most 36500 days (100 years), or 0 to keep every post')
    .default(0),
});

/** The record service's environment. */
export const recordEnv = z
  .object({
    /** Where the RecordService gRPC server listens. */
    RECORD_GRPC_ADDR: address.default('0.0.0.0:50055'),
    /** The room, whose WatchPosts it follows. */
    ROOM_ADDR: grpcTarget.default('127.0.0.1:50051'),
    ...databaseEnv.shape,
    ...serviceEnv.shape,
    /** The key its cursors are signed with, the room's (docs/decisions.md §6): a cursor of either pages both. */
    ...cursorSecretEnv.shape,
  })
  .superRefine((env, context) => {
    if (env.DATABASE_READ_URL !== undefined && env.DATABASE_URL === undefined) {
      context.addIssue({ code: 'custom', path: ['DATABASE_READ_URL'], message: 'needs DATABASE_URL (the primary it replicates); PGlite has no replicas' });
    }
  });

export type RecordConfig = z.output<typeof recordEnv>;
