import { address, grpcTarget, cursorSecretEnv, serviceEnv } from '@agentroom/kit/config';
import { z } from 'zod';

/** The messaging service's environment. */
export const messagingEnv = z.object({
  /** Where the MessagingService gRPC server listens. */
  MESSAGING_GRPC_ADDR: address.default('0.0.0.0:50053'),
  /** The room service, which knows the agents (both ends of every message are looked up there). */
  ROOM_ADDR: grpcTarget.default('127.0.0.1:50051'),
  ...serviceEnv.shape,
  /** The key its cursors are signed with (docs/decisions.md §6); unset, a random one per start. */
  ...cursorSecretEnv.shape,
});

export type MessagingConfig = z.output<typeof messagingEnv>;
