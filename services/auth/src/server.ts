import * as grpc from '@grpc/grpc-js';
import { isWellFormedRefreshToken, SCOPES, SIGNUP_SCOPES_MAX } from '@agentroom/kit/domain';
import { GrpcServer } from '@agentroom/kit/grpc';
import type { Logger } from '@agentroom/kit/log';
import { DomainError, unavailable } from '@agentroom/kit/problems';
import { authProto, type AuthServiceHandlers, type WatchRevocationsResponse } from '@agentroom/proto';
import { z } from 'zod';
import type { Authorizations } from './authorization.js';
import { type ClientMetadataInput, CLIENT_URL_MAX, type OAuthClients } from './clients.js';
import type { DeviceFlows } from './device-flow.js';
import type { Humans } from './humans.js';
import type { SuspensionRecord } from './records.js';
import type { Safety } from './safety.js';
import { REVOCATION_HEARTBEAT_MS } from './store.js';
import type { Tokens } from './tokens.js';

export const AUTH_SERVICE_NAME = 'agentroom.auth.v1.AuthService';

// gRPC fields are outside data too: typed and bounded here, judged by the domain.
const startRequest = z.object({
  scopes: z.array(z.string().max(64)).max(SIGNUP_SCOPES_MAX),
  agentName: z.string().max(1_000),
  clientId: z.string().max(1_000),
  bearerToken: z.string().max(1_000),
});
const pollRequest = z.object({ deviceCode: z.string().max(1_000) });
const tokenRequest = z.object({ token: z.string() });
const sessionRequest = z.object({ sessionId: z.string().max(1_000) });
const registerRequest = z.object({
  redirectUris: z.array(z.string().max(CLIENT_URL_MAX)).max(50),
  clientName: z.string().max(1_000),
  clientUri: z.string().max(CLIENT_URL_MAX),
  logoUri: z.string().max(CLIENT_URL_MAX),
  grantTypes: z.array(z.string().max(200)).max(20),
  responseTypes: z.array(z.string().max(200)).max(20),
  tokenEndpointAuthMethod: z.string().max(200),
  scope: z.string().max(1_000),
  softwareId: z.string().max(1_000),
  softwareVersion: z.string().max(1_000),
  address: z.string().max(200),
});
const exchangeRequest = z.object({
  grant: z.enum(['TOKEN_GRANT_UNSPECIFIED', 'TOKEN_GRANT_AUTHORIZATION_CODE', 'TOKEN_GRANT_REFRESH_TOKEN']),
  clientId: z.string().max(CLIENT_URL_MAX),
  code: z.string().max(1_000),
  codeVerifier: z.string().max(1_000),
  redirectUri: z.string().max(CLIENT_URL_MAX),
  refreshToken: z.string().max(1_000),
  resource: z.string().max(CLIENT_URL_MAX),
});

/** A gRPC string field: empty means not sent. */
function given(value: string): string | undefined {
  return value === '' ? undefined : value;
}
const provisionRequest = z.object({
  humanName: z.string().max(1_000),
  agentName: z.string().max(1_000),
  scopes: z.array(z.string().max(64)).max(SIGNUP_SCOPES_MAX),
  reason: z.string().max(1_000),
});

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

function parseProvision(request: unknown): z.output<typeof provisionRequest> {
  const parsed = provisionRequest.safeParse(request);
  if (parsed.success) return parsed.data;
  const parameter = parameterOf(parsed.error);
  if (parameter === 'scopes') {
    throw new DomainError('invalid-scope', {
      detail: 'scopes is too long, or holds something that is not a scope.',
      fields: { parameter: 'scopes', valid_scopes: [...SCOPES] },
    });
  }
  throw new DomainError('invalid-request', { detail: `${parameter} is too long.`, fields: { parameter, expected: 'at most 200 characters' } });
}

/**
 * Whether a gRPC peer, as grpc-js names it (`127.0.0.1:5123`, `::1:5123`, `::ffff:127.0.0.1:5123`,
 * `[::1]:5123`), is on this machine's loopback: 127.0.0.0/8 or ::1, IPv4-mapped or not.
 */
export function isLoopbackPeer(peer: string): boolean {
  const host = peer
    .replace(/^ipv[46]:/, '')
    .replace(/:\d+$/, '')
    .replace(/^\[(.*)\]$/, '$1');
  return host === '::1' || /^(?:::ffff:)?127(?:\.\d{1,3}){3}$/i.test(host);
}

/**
 * Serves a method only to callers on the process's own loopback. Provisioning mints tokens in any
 * human's name, so reaching the gRPC port (which peers such as edge may) is not enough: the caller
 * must be where auth runs, which in Kubernetes takes `kubectl exec` or `kubectl port-forward` into
 * its pod, rights an operator has and a compromised neighbour does not.
 */
function loopbackOnly<Req, Res>(method: string, log: Logger, handler: grpc.handleUnaryCall<Req, Res>): grpc.handleUnaryCall<Req, Res> {
  return (call, callback) => {
    const peer = call.getPeer();
    if (isLoopbackPeer(peer)) {
      handler(call, callback);
      return;
    }
    log.warn({ method, peer }, `${method} refused: the caller is not on this process's loopback`);
    const details = `${method} serves only callers on the auth process's own loopback: run the command inside its pod (kubectl exec) or through kubectl port-forward`;
    callback(Object.assign(new Error(details), { code: grpc.status.PERMISSION_DENIED, details, metadata: new grpc.Metadata() }), null);
  };
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
  clients: OAuthClients;
  authorizations: Authorizations;
  safety: Safety;
  log: Logger;
}

const moderatorRequest = z.object({ humanName: z.string().max(1_000), moderator: z.boolean() });

/** A suspension as the proto carries it (agentroom.auth.v1.Suspension); null when none holds. */
function suspensionMessage(suspension: SuspensionRecord | undefined): { by: string; reason: string; since: string; until: string } | null {
  if (suspension === undefined) return null;
  return {
    by: suspension.by,
    reason: suspension.reason,
    since: new Date(suspension.since).toISOString(),
    until: suspension.until === undefined ? '' : new Date(suspension.until).toISOString(),
  };
}

/** The AuthService over the domain: thin wiring; rules live in device-flow.ts and tokens.ts. */
export function authHandlers(server: GrpcServer, { flows, tokens, humans, clients, authorizations, safety, log }: AuthHandlersOptions): AuthServiceHandlers {
  return {
    RotateToken: server.unary('RotateToken', async (request) => {
      const rotated = await tokens.rotate(parse(tokenRequest, request).token);
      const { record } = rotated;
      // The new token is made; should the audit fail, the agent is told so (unavailable) and its old
      // token still works for the grace, so nothing is lost by rotating again.
      await safety.audit({
        by: 'agent',
        actorId: record.agentId,
        action: 'rotate_token',
        agentId: record.agentId,
        detail: JSON.stringify({ token_id: record.id, previous_expires_at: new Date(rotated.previousExpiresAt).toISOString() }),
      });
      return {
        accessToken: rotated.token,
        tokenId: record.id,
        expiresAt: new Date(record.expiresAt).toISOString(),
        scopes: record.scopes,
        agentId: record.agentId,
        previousExpiresAt: new Date(rotated.previousExpiresAt).toISOString(),
        rotationsLeft: rotated.rotationsLeft,
      };
    }),

    SetModerator: loopbackOnly(
      'SetModerator',
      log,
      server.unary('SetModerator', async (request) => {
        const { humanName, moderator } = parse(moderatorRequest, request);
        const human = await humans.setModerator(humanName, moderator);
        if (human === undefined) throw new DomainError('not-found', { detail: 'No human has this name.', fields: { parameter: 'human_name' } });
        await safety.audit({
          by: 'operator',
          actorId: '',
          action: moderator ? 'grant_moderator' : 'revoke_moderator',
          detail: JSON.stringify({ human_id: human.id }),
        });
        return { humanId: human.id, humanName: human.name, moderator };
      }),
    ),

    ListModerators: loopbackOnly(
      'ListModerators',
      log,
      server.unary('ListModerators', async () => ({
        moderators: (await humans.moderators()).map((human) => ({ humanId: human.id, humanName: human.name, moderator: true })),
      })),
    ),

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

    AuthenticateToken: server.unary('AuthenticateToken', async (request) => {
      const { suspension, ...principal } = await tokens.authenticate(parse(tokenRequest, request).token);
      return { ...principal, suspension: suspensionMessage(suspension) };
    }),

    RevokeToken: server.unary('RevokeToken', async (request) => {
      const { token } = parse(tokenRequest, request);
      if (isWellFormedRefreshToken(token)) await authorizations.revokeRefreshToken(token);
      else await tokens.revoke(token);
      return {};
    }),

    RegisterClient: server.unary('RegisterClient', async (request) => {
      const parsed = registerRequest.safeParse(request);
      if (!parsed.success) {
        const parameter = parameterOf(parsed.error);
        throw new DomainError('invalid-client-metadata', { detail: `${parameter} is too long.`, fields: { parameter, expected: 'shorter' } });
      }
      const r = parsed.data;
      const input: ClientMetadataInput = {
        redirectUris: r.redirectUris,
        clientName: given(r.clientName),
        clientUri: given(r.clientUri),
        logoUri: given(r.logoUri),
        grantTypes: r.grantTypes.length === 0 ? undefined : r.grantTypes,
        responseTypes: r.responseTypes.length === 0 ? undefined : r.responseTypes,
        tokenEndpointAuthMethod: given(r.tokenEndpointAuthMethod),
        scope: given(r.scope),
        softwareId: given(r.softwareId),
        softwareVersion: given(r.softwareVersion),
      };
      const client = await clients.register(input, r.address);
      return {
        clientId: client.clientId,
        clientIdIssuedAt: String(Math.floor(client.createdAt / 1000)),
        redirectUris: client.redirectUris,
        clientName: client.clientName ?? '',
        clientUri: client.clientUri ?? '',
        logoUri: client.logoUri ?? '',
        grantTypes: client.grantTypes,
        responseTypes: client.responseTypes,
        scope: client.scope ?? '',
        softwareId: client.softwareId ?? '',
        softwareVersion: client.softwareVersion ?? '',
      };
    }),

    ExchangeToken: server.unary('ExchangeToken', async (request) => {
      const r = parse(exchangeRequest, request);
      const issued =
        r.grant === 'TOKEN_GRANT_AUTHORIZATION_CODE'
          ? await authorizations.exchangeCode({
              code: r.code,
              codeVerifier: r.codeVerifier,
              redirectUri: r.redirectUri,
              clientId: r.clientId,
              resource: r.resource,
            })
          : r.grant === 'TOKEN_GRANT_REFRESH_TOKEN'
            ? await authorizations.refresh({ refreshToken: r.refreshToken, clientId: r.clientId, resource: r.resource })
            : undefined;
      if (!issued)
        throw new DomainError('invalid-request', {
          detail: 'grant is missing.',
          fields: { parameter: 'grant_type', expected: 'authorization_code or refresh_token' },
        });
      return {
        accessToken: issued.accessToken,
        expiresIn: issued.expiresIn,
        refreshToken: issued.refreshToken,
        scopes: issued.scopes,
        agentId: issued.agentId,
      };
    }),

    WatchRevocations: server.serverStream('WatchRevocations', async (_request, call) => {
      const stop = new AbortController();
      call.on('cancelled', () => stop.abort());
      call.on('close', () => stop.abort());
      // At shutdown the stream ends, and its watcher moves to another replica.
      const signal = AbortSignal.any([stop.signal, server.drainSignal]);
      let lost: Error | undefined;
      let lastWrite = 0;
      const write = (message: WatchRevocationsResponse): void => {
        if (signal.aborted) return;
        lastWrite = Date.now();
        call.write(message);
      };
      const unwatch = await tokens.watchRevocations({
        revoked: (revocation) =>
          write({
            revocation: {
              id: revocation.id,
              tokenId: revocation.tokenId,
              agentId: revocation.agentId,
              revokedAt: new Date(revocation.revokedAt).toISOString(),
            },
          }),
        // A heartbeat only when the stream has been quiet: revocations say "alive" too.
        alive: () => {
          if (Date.now() - lastWrite >= REVOCATION_HEARTBEAT_MS / 2) write({});
        },
        broken: (error) => {
          lost = error;
          stop.abort();
        },
      });
      try {
        if (!signal.aborted) {
          // Initial metadata tells the watcher it is positioned: every revocation from now on reaches it.
          call.sendMetadata(new grpc.Metadata());
          await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
        }
      } finally {
        unwatch();
      }
      if (lost) {
        log.warn({ err: lost }, 'revocation feed lost; ending its watch, the watcher reconnects');
        throw unavailable('This replica lost the revocation feed; watch again.', 1);
      }
      if (!call.cancelled) call.end();
    }),

    ResolveSession: server.unary('ResolveSession', async (request) => {
      const { sessionId } = parse(sessionRequest, request);
      const found = sessionId === '' ? undefined : await humans.session(sessionId);
      if (!found) return {};
      const [{ agents, approvedTotal, provisionedTotal }, moderator] = await Promise.all([
        authorizations.agentChoices(found.human.id),
        humans.isModerator(found.human.id),
      ]);
      // The room page posts as none of the human's suspended agents, and says why.
      const suspensions = await Promise.all(agents.map((agent) => safety.suspensionOf(agent.agentId)));
      return {
        humanId: found.human.id,
        humanName: found.human.name,
        csrfToken: found.session.csrf,
        agents: agents.map((agent, i) => ({ ...agent, suspension: suspensionMessage(suspensions[i]) })),
        approvedTotal,
        provisionedTotal,
        moderator,
      };
    }),

    ProvisionAgent: loopbackOnly(
      'ProvisionAgent',
      log,
      server.unary('ProvisionAgent', async (request, call) => {
        const agent = await flows.provision({ ...parseProvision(request), caller: call.getPeer() });
        return {
          agentId: agent.agentId,
          agentName: agent.agentName,
          accessToken: agent.token,
          scopes: agent.scopes,
          human: agent.human,
          tokenId: agent.tokenId,
          expiresAt: new Date(agent.expiresAt).toISOString(),
        };
      }),
    ),
  };
}

export type AuthGrpcServerOptions = AuthHandlersOptions;

/** A gRPC server with the auth service and health registered, not yet listening. */
export function createAuthGrpcServer(options: AuthGrpcServerOptions): GrpcServer {
  const server = new GrpcServer('auth', options.log);
  const handlers = authHandlers(server, options);
  server.addService(AUTH_SERVICE_NAME, authProto().AuthService.service, handlers as grpc.UntypedServiceImplementation);
  return server;
}
