import { address, serviceEnv } from '@agentroom/kit';
import { z } from 'zod';

/** The room service's environment. */
export const roomEnv = z.object({
  /** Where the RoomService gRPC server listens. */
  ROOM_GRPC_ADDR: address.default('0.0.0.0:50051'),
  ...serviceEnv.shape,
});

export type RoomConfig = z.output<typeof roomEnv>;
