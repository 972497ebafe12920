import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { ProtoGrpcType as AuthProtoType } from './gen/auth.js';
import type { ProtoGrpcType as MessagingProtoType } from './gen/messaging.js';
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

export type { AuthServiceClient, AuthServiceHandlers } from './gen/agentroom/auth/v1/AuthService.js';
export type { StartDeviceFlowResponse__Output } from './gen/agentroom/auth/v1/StartDeviceFlowResponse.js';
export type { PollDeviceFlowResponse__Output } from './gen/agentroom/auth/v1/PollDeviceFlowResponse.js';
export type { AuthenticateTokenResponse__Output } from './gen/agentroom/auth/v1/AuthenticateTokenResponse.js';
export type { RevokeTokenResponse__Output } from './gen/agentroom/auth/v1/RevokeTokenResponse.js';
export type { RegisterClientResponse__Output } from './gen/agentroom/auth/v1/RegisterClientResponse.js';
export type { ExchangeTokenResponse__Output } from './gen/agentroom/auth/v1/ExchangeTokenResponse.js';
export type { TokenGrant, TokenGrant__Output } from './gen/agentroom/auth/v1/TokenGrant.js';
export type { ResolveSessionResponse__Output } from './gen/agentroom/auth/v1/ResolveSessionResponse.js';
export type { WatchRevocationsResponse, WatchRevocationsResponse__Output } from './gen/agentroom/auth/v1/WatchRevocationsResponse.js';
export type { FlowStatus, FlowStatus__Output } from './gen/agentroom/auth/v1/FlowStatus.js';
export type { RoomServiceClient, RoomServiceHandlers } from './gen/agentroom/room/v1/RoomService.js';
export type { Post, Post__Output } from './gen/agentroom/room/v1/Post.js';
export type { Agent, Agent__Output } from './gen/agentroom/room/v1/Agent.js';
export type { Via, Via__Output } from './gen/agentroom/room/v1/Via.js';
export type { ListPostsResponse__Output } from './gen/agentroom/room/v1/ListPostsResponse.js';
export type { ListAgentsResponse__Output } from './gen/agentroom/room/v1/ListAgentsResponse.js';
export type { CreatePostResponse__Output } from './gen/agentroom/room/v1/CreatePostResponse.js';
export type { UpsertAgentResponse__Output } from './gen/agentroom/room/v1/UpsertAgentResponse.js';
export type { GetAgentResponse__Output } from './gen/agentroom/room/v1/GetAgentResponse.js';
export type { WatchPostsResponse__Output } from './gen/agentroom/room/v1/WatchPostsResponse.js';
export type { MessagingServiceClient, MessagingServiceHandlers } from './gen/agentroom/messaging/v1/MessagingService.js';
export type { Message, Message__Output } from './gen/agentroom/messaging/v1/Message.js';
// Named apart from the room's Via: the two services own their contracts.
export type { Via as MessageVia, Via__Output as MessageVia__Output } from './gen/agentroom/messaging/v1/Via.js';
export type { SendMessageResponse__Output } from './gen/agentroom/messaging/v1/SendMessageResponse.js';
export type { ListMessagesResponse__Output } from './gen/agentroom/messaging/v1/ListMessagesResponse.js';
export type { WatchMessagesResponse__Output } from './gen/agentroom/messaging/v1/WatchMessagesResponse.js';
