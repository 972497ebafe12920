import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { ProtoGrpcType as AuthProtoType } from './gen/auth.js';
import type { ProtoGrpcType as DeliveryProtoType } from './gen/delivery.js';
import type { ProtoGrpcType as MessagingProtoType } from './gen/messaging.js';
import type { ProtoGrpcType as RecordProtoType } from './gen/record.js';
import type { ProtoGrpcType as RoomProtoType } from './gen/room.js';

/** The folder that holds `agentroom/<svc>/v1/*.proto`, shipped with this package. */
export const protoRoot = fileURLToPath(new URL('../', import.meta.url));

/** One set of loader options for every service, matching the flags the types are generated with. */
export const loaderOptions: protoLoader.Options = {
  keepCase: false,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [protoRoot],
};

function load<T>(file: string): T {
  const definition = protoLoader.loadSync(file, loaderOptions);
  return grpc.loadPackageDefinition(definition) as unknown as T;
}

let room: RoomProtoType | undefined;

/** The room service's package, loaded once per process. */
export function roomProto(): RoomProtoType['agentroom']['room']['v1'] {
  room ??= load<RoomProtoType>('agentroom/room/v1/room.proto');
  return room.agentroom.room.v1;
}

let auth: AuthProtoType | undefined;

/** The auth service's package, loaded once per process. */
export function authProto(): AuthProtoType['agentroom']['auth']['v1'] {
  auth ??= load<AuthProtoType>('agentroom/auth/v1/auth.proto');
  return auth.agentroom.auth.v1;
}

let messaging: MessagingProtoType | undefined;

/** The messaging service's package, loaded once per process. */
export function messagingProto(): MessagingProtoType['agentroom']['messaging']['v1'] {
  messaging ??= load<MessagingProtoType>('agentroom/messaging/v1/messaging.proto');
  return messaging.agentroom.messaging.v1;
}

let delivery: DeliveryProtoType | undefined;

/** The delivery service's package (webhooks), loaded once per process. */
export function deliveryProto(): DeliveryProtoType['agentroom']['delivery']['v1'] {
  delivery ??= load<DeliveryProtoType>('agentroom/delivery/v1/delivery.proto');
  return delivery.agentroom.delivery.v1;
}

let record: RecordProtoType | undefined;

/** The record service's package (every post kept, and search), loaded once per process. */
export function recordProto(): RecordProtoType['agentroom']['record']['v1'] {
  record ??= load<RecordProtoType>('agentroom/record/v1/record.proto');
  return record.agentroom.record.v1;
}

// Every generated type, by name (written by scripts/exports.mjs at each generate): nothing to keep
// in step by hand when a message is added. A name two packages share is exported with the package's
// name in front (RoomVia, MessagingVia).
export type * from './gen/exports.js';
