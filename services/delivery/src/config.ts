import { address, grpcTarget, serviceEnv } from '@agentroom/kit/config';
import { z } from 'zod';

/** The delivery service's environment. */
export const deliveryEnv = z.object({
  /** Where the DeliveryService gRPC server listens. */
  DELIVERY_GRPC_ADDR: address.default('0.0.0.0:50054'),
  /** The messaging service, whose WatchEvents it follows. */
  MESSAGING_ADDR: grpcTarget.default('127.0.0.1:50053'),
  /** The room service, asked before each attempt whether the post an event is about was removed (docs/decisions.md §42). */
  ROOM_ADDR: grpcTarget.default('127.0.0.1:50051'),
  /**
   * `true` lifts the https and address rules of webhook URLs (http:, loopback and private
   * addresses allowed): for tests and private deployments only. A warning is logged at start.
   */
  WEBHOOKS_ALLOW_PRIVATE_TARGETS: z
    .enum(['true', 'false'], { message: 'must be true or false' })
    .default('false')
    .transform((value) => value === 'true'),
  ...serviceEnv.shape,
});

export type DeliveryConfig = z.output<typeof deliveryEnv>;
