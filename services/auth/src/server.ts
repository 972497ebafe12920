import type * as grpc from '@grpc/grpc-js';
import { DomainError, GrpcServer, type Logger, SCOPES } from '@agentroom/kit';
import { authProto, type AuthServiceHandlers } from '@agentroom/proto';
import { z } from 'zod';
import type { DeviceFlows } from './device-flow.js';
import type { Humans } from './humans.js';
import type { Tokens } from './tokens.js';

export const AUTH_SERVICE_NAME = 'agentroom.auth.v1.AuthService';

// gRPC fields are outside data too: typed and bounded here, judged by the domain.
const startRequest = z.object({
  scopes: z.array(z.string().max(64)).max(20),
  agentName: z.string().max(1_000),
  clientId: z.string().max(1_000),
  bearerToken: z.string().max(1_000),
});
const pollRequest = z.object({ deviceCode: z.string().max(1_000) });
const tokenRequest = z.object({ token: z.string() });
const sessionRequest = z.object({ sessionId: z.string().max(1_000) });

/** The first field that failed, as the parameter name agents know. */
function parameterOf(error: z.ZodError): string {
  const field = String(error.issues[0]?.path[0] ?? '');
  return field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

function parseStart(request: unknown): z.output<typeof startRequest> {
  const parsed = startRequest.safeParse(request);
  if (parsed.success) return parsed.data;
  const parameter = parameterOf(parsed.error);
  if (parameter === 'scopes') {
    throw new DomainError('invalid-scope', {
      detail: 'scopes is too long, or holds something that is not a scope.',
      fields: { parameter: 'scopes', valid_scopes: [...SCOPES] },
    });
  }
  if (parameter === 'bearer_token') throw new DomainError('token-invalid', { detail: 'The bearer token is malformed.' });
  throw new DomainError('invalid-request', { detail: `${parameter} is too long.`, fields: { parameter, expected: 'at most 100 characters' } });
}

function parse<T>(schema: z.ZodType<T>, request: unknown): T {
  const parsed = schema.safeParse(request);
  if (parsed.success) return parsed.data;
  const parameter = parameterOf(parsed.error);
  throw new DomainError('invalid-request', { detail: `${parameter} is malformed.`, fields: { parameter, expected: 'the value exactly as it was issued' } });
}

export interface AuthHandlersOptions {
  flows: DeviceFlows;
  tokens: Tokens;
  humans: Humans;
}

/** The AuthService over the domain: thin wiring; rules live in device-flow.ts and tokens.ts. */
export function authHandlers(server: GrpcServer, { flows, tokens, humans }: AuthHandlersOptions): AuthServiceHandlers {
  return {
    StartDeviceFlow: server.unary('StartDeviceFlow', async (request) => flows.start(parseStart(request))),

    PollDeviceFlow: server.unary('PollDeviceFlow', async (request) => {
      const { deviceCode } = parse(pollRequest, request);
      if (deviceCode === '') {
        throw new DomainError('invalid-request', {
          detail: 'device_code is missing.',
          fields: { parameter: 'device_code', expected: 'the device_code that the start of the signup answered' },
        });
      }
      const result = await flows.poll(deviceCode);
      if (result.status === 'pending') return { status: 'FLOW_STATUS_PENDING' };
      const { grant } = result;
      return {
        status: 'FLOW_STATUS_COMPLETED',
        accessToken: grant.accessToken,
        scopes: grant.scopes,
        human: grant.humanLabel,
        agentId: grant.agentId,
        expiresIn: result.expiresIn,
      };
    }),

    AuthenticateToken: server.unary('AuthenticateToken', async (request) => tokens.authenticate(parse(tokenRequest, request).token)),

    RevokeToken: server.unary('RevokeToken', async (request) => {
      await tokens.revoke(parse(tokenRequest, request).token);
      return {};
    }),

    ResolveSession: server.unary('ResolveSession', async (request) => {
      const { sessionId } = parse(sessionRequest, request);
      const found = sessionId === '' ? undefined : await humans.session(sessionId);
      if (!found) return {};
      const agents = new Map<string, { agentId: string; agentName: string; scopes: Set<string> }>();
      for (const token of await tokens.liveOfHuman(found.human.id)) {
        const agent = agents.get(token.agentId) ?? { agentId: token.agentId, agentName: token.agentName, scopes: new Set<string>() };
        for (const scope of token.scopes) agent.scopes.add(scope);
        agents.set(token.agentId, agent);
      }
      return {
        humanId: found.human.id,
        humanName: found.human.name,
        csrfToken: found.session.csrf,
        agents: [...agents.values()].map((agent) => ({ ...agent, scopes: SCOPES.filter((scope) => agent.scopes.has(scope)) })),
      };
    }),
  };
}

export interface AuthGrpcServerOptions extends AuthHandlersOptions {
  log: Logger;
}

/** A gRPC server with the auth service and health registered, not yet listening. */
export function createAuthGrpcServer(options: AuthGrpcServerOptions): GrpcServer {
  const server = new GrpcServer('auth', options.log);
  const handlers = authHandlers(server, options);
  server.addService(AUTH_SERVICE_NAME, authProto().AuthService.service, handlers as grpc.UntypedServiceImplementation);
  return server;
}
