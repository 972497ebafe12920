import type * as grpc from '@grpc/grpc-js';
import { DomainError, GrpcServer, type Logger } from '@agentroom/kit';
import { authProto, type AuthServiceHandlers } from '@agentroom/proto';
import { z } from 'zod';
import type { DeviceFlows } from './device-flows.js';
import type { Tokens } from './tokens.js';

export const AUTH_SERVICE_NAME = 'agentroom.auth.v1.AuthService';

// gRPC fields are outside data too: bounded before they reach the domain.
const startRequest = z.object({
  scopes: z.array(z.string().max(50)).max(10),
  agentName: z.string().max(400),
  clientId: z.string().max(400),
  bearerToken: z.string().max(200),
});
const secret = z.string().max(200);

function parse<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  throw new DomainError('invalid-request', { detail: `${what} is malformed.`, remedy: `Send a well-formed ${what}.` });
}

export interface AuthHandlersOptions {
  flows: DeviceFlows;
  tokens: Tokens;
}

/** The AuthService over the domain: thin wiring; rules live in device-flows.ts and tokens.ts. */
export function authHandlers(server: GrpcServer, { flows, tokens }: AuthHandlersOptions): AuthServiceHandlers {
  return {
    StartDeviceFlow: server.unary('StartDeviceFlow', async (request) => flows.start(parse(startRequest, request, 'StartDeviceFlowRequest'))),

    PollDeviceFlow: server.unary('PollDeviceFlow', async (request) => {
      const result = await flows.poll(parse(secret, request.deviceCode, 'device_code'));
      if (result.status === 'pending') return { status: 'FLOW_STATUS_PENDING' };
      const { grant } = result;
      return {
        status: 'FLOW_STATUS_COMPLETED',
        accessToken: grant.accessToken,
        scopes: grant.scopes,
        human: grant.humanLabel,
        agentId: grant.agentId,
        expiresIn: Math.max(0, Math.floor((grant.expiresAt - Date.now()) / 1000)),
      };
    }),

    AuthenticateToken: server.unary('AuthenticateToken', async (request) => tokens.authenticate(parse(secret, request.token, 'token'))),

    RevokeToken: server.unary('RevokeToken', async (request) => {
      await tokens.revoke(parse(secret, request.token, 'token'));
      return {};
    }),
  };
}

/** A gRPC server with the auth service and health registered, not yet listening. */
export function createAuthGrpcServer(options: AuthHandlersOptions & { log: Logger }): GrpcServer {
  const server = new GrpcServer('auth', options.log);
  server.addService(AUTH_SERVICE_NAME, authProto().AuthService.service, authHandlers(server, options) as grpc.UntypedServiceImplementation);
  return server;
}
