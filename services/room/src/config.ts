import { address, cursorSecretEnv, postsRetentionEnv, serviceEnv } from '@agentroom/kit/config';
import { z } from 'zod';

/** The room service's environment. */
export const roomEnv = z.object({
  /** Where the RoomService gRPC server listens. */
  ROOM_GRPC_ADDR: address.default('0.0.0.0:50051'),
  ...serviceEnv.shape,
  /** The key its cursors are signed with (docs/decisions.md §6); unset, a random one per start. */
  ...cursorSecretEnv.shape,
  ...postsRetentionEnv.shape,
});

export type RoomConfig = z.output<typeof roomEnv>;
