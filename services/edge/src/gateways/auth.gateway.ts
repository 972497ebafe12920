import * as grpc from '@grpc/grpc-js';
import type { Scope } from '@agentroom/kit/domain';
import { clientOptions, outgoingMetadata, unaryCall } from '@agentroom/kit/grpc';
import {
  type AuthenticateTokenResponse__Output,
  authProto,
  type AuthServiceClient,
  type ExchangeTokenResponse__Output,
  type RegisterClientResponse__Output,
  type PollDeviceFlowResponse__Output,
  type ResolveSessionResponse__Output,
  type RevokeTokenResponse__Output,
  type StartDeviceFlowResponse__Output,
  type WatchRevocationsResponse__Output,
} from '@agentroom/proto';
import { type UpstreamWatch, upstreamWatch } from './upstream.js';

/** Who a valid bearer token speaks for. */
export interface Principal {
  tokenId: string;
  agentId: string;
  agentName: string;
  humanLabel: string;
  scopes: Scope[];
  expiresAt: string;
  /** The resource the token is bound to (RFC 8707): it works only at that URL and below; '' everywhere. */
  resource: string;
}

/** What registration answers (RFC 7591), as the auth service kept it. */
export type ClientRegistration = Omit<RegisterClientResponse__Output, 'clientIdIssuedAt'> & { clientIdIssuedAt: number };

/** The token endpoint's answer for a code or a refresh. */
export type IssuedTokens = Omit<ExchangeTokenResponse__Output, 'scopes'> & { scopes: Scope[] };

export interface DeviceFlowStart {
  deviceCode: string;
  userCode: string;
  expiresIn: number;
  interval: number;
  scopes: Scope[];
}

/** A signed-in human, as a page of edge sees them through the `ar_session` cookie. */
export interface SignedInHuman {
  humanId: string;
  humanName: string;
  /** The CSRF token every form of this session carries. */
  csrfToken: string;
  /**
   * The agents the human may post as from the room's page, with their scopes: those of their newest
   * AGENT_CHOICES approvals and their connections, then the newest AGENT_CHOICES an operator
   * provisioned in their name, marked.
   */
  agents: { agentId: string; agentName: string; scopes: Scope[]; provisioned: boolean }[];
  /** How many live tokens the human approved one by one; the agents of the newest AGENT_CHOICES are among `agents`. */
  approvedTotal: number;
  /** How many live provisioned agents the human has in all. */
  provisionedTotal: number;
}

/** What the revocation stream says: a token was revoked, or (a heartbeat) the stream is still followed. */
export type RevocationSignal = { kind: 'revoked'; tokenId: string; agentId: string } | { kind: 'alive' };

export type DeviceFlowPoll =
  | { status: 'pending' }
  | { status: 'completed'; accessToken: string; scopes: Scope[]; human: string; agentId: string; expiresIn: number };

/** The auth service as edge sees it: typed Promises with a deadline on every call. */
export class AuthGateway {
  private readonly client: AuthServiceClient;
  private readonly revokedListeners: ((token: string) => void)[] = [];

  constructor(
    address: string,
    private readonly deadlineMs: number,
  ) {
    const AuthService = authProto().AuthService;
    this.client = new AuthService(address, grpc.credentials.createInsecure(), clientOptions(AuthService.service));
  }

  async startDeviceFlow(input: { scopes: string[]; agentName: string; clientId: string; bearerToken: string }): Promise<DeviceFlowStart> {
    const response = await unaryCall<StartDeviceFlowResponse__Output>(this.deadlineMs, (metadata, options, callback) =>
      this.client.startDeviceFlow(
        { scopes: input.scopes, agentName: input.agentName, clientId: input.clientId, bearerToken: input.bearerToken },
        metadata,
        options,
        callback,
      ),
    );
    return {
      deviceCode: response.deviceCode,
      userCode: response.userCode,
      expiresIn: response.expiresIn,
      interval: response.interval,
      scopes: response.scopes as Scope[],
    };
  }

  async pollDeviceFlow(deviceCode: string): Promise<DeviceFlowPoll> {
    const response = await unaryCall<PollDeviceFlowResponse__Output>(this.deadlineMs, (metadata, options, callback) =>
      this.client.pollDeviceFlow({ deviceCode }, metadata, options, callback),
    );
    if (response.status !== 'FLOW_STATUS_COMPLETED') return { status: 'pending' };
    return {
      status: 'completed',
      accessToken: response.accessToken,
      scopes: response.scopes as Scope[],
      human: response.human,
      agentId: response.agentId,
      expiresIn: response.expiresIn,
    };
  }

  async authenticate(token: string): Promise<Principal> {
    const response = await unaryCall<AuthenticateTokenResponse__Output>(this.deadlineMs, (metadata, options, callback) =>
      this.client.authenticateToken({ token }, metadata, options, callback),
      { repeatable: true },
    );
    return {
      tokenId: response.tokenId,
      agentId: response.agentId,
      agentName: response.agentName,
      humanLabel: response.humanLabel,
      scopes: response.scopes as Scope[],
      expiresAt: response.expiresAt,
      resource: response.resource,
    };
  }

  async registerClient(input: {
    redirectUris: string[];
    clientName: string;
    clientUri: string;
    logoUri: string;
    grantTypes: string[];
    responseTypes: string[];
    tokenEndpointAuthMethod: string;
    scope: string;
    softwareId: string;
    softwareVersion: string;
    address: string;
  }): Promise<ClientRegistration> {
    const response = await unaryCall<RegisterClientResponse__Output>(this.deadlineMs, (metadata, options, callback) => this.client.registerClient(input, metadata, options, callback));
    return { ...response, clientIdIssuedAt: Number(response.clientIdIssuedAt) };
  }

  async exchangeToken(input: {
    grant: 'TOKEN_GRANT_AUTHORIZATION_CODE' | 'TOKEN_GRANT_REFRESH_TOKEN';
    clientId: string;
    code: string;
    codeVerifier: string;
    redirectUri: string;
    refreshToken: string;
    resource: string;
  }): Promise<IssuedTokens> {
    const response = await unaryCall<ExchangeTokenResponse__Output>(this.deadlineMs, (metadata, options, callback) => this.client.exchangeToken(input, metadata, options, callback));
    return { ...response, scopes: response.scopes as Scope[] };
  }

  async revoke(token: string): Promise<void> {
    await unaryCall<RevokeTokenResponse__Output>(this.deadlineMs, (metadata, options, callback) =>
      this.client.revokeToken({ token }, metadata, options, callback),
      { repeatable: true },
    );
    for (const listener of this.revokedListeners) listener(token);
  }

  /**
   * Calls `listener` with each token revoked through this gateway, once auth has answered: the
   * token cache forgets it before the revocation is answered, so the agent that revoked it is
   * refused at its very next call here, without waiting for the revocation stream.
   */
  onRevoked(listener: (token: string) => void): void {
    this.revokedListeners.push(listener);
  }

  /**
   * Every token revoked from now on, by any auth replica, and a heartbeat at least every second.
   * No deadline: the stream lasts until cancelled or until auth ends it.
   */
  watchRevocations(): UpstreamWatch<RevocationSignal> {
    const call = this.client.watchRevocations({}, outgoingMetadata());
    return upstreamWatch(call, (response: WatchRevocationsResponse__Output): RevocationSignal | undefined => {
      const revocation = response.revocation;
      if (revocation === null) return { kind: 'alive' };
      // A revocation that names no token can drop nothing; it still says the stream is alive.
      if (revocation.tokenId === '') return { kind: 'alive' };
      return { kind: 'revoked', tokenId: revocation.tokenId, agentId: revocation.agentId };
    });
  }

  /** The human signed in with this cookie value, or undefined when the session is unknown or expired. */
  async resolveSession(sessionId: string): Promise<SignedInHuman | undefined> {
    const response = await unaryCall<ResolveSessionResponse__Output>(this.deadlineMs, (metadata, options, callback) =>
      this.client.resolveSession({ sessionId }, metadata, options, callback),
    );
    if (response.humanId === '') return undefined;
    return {
      humanId: response.humanId,
      humanName: response.humanName,
      csrfToken: response.csrfToken,
      agents: response.agents.map((agent) => ({ agentId: agent.agentId, agentName: agent.agentName, scopes: agent.scopes as Scope[], provisioned: agent.provisioned })),
      approvedTotal: response.approvedTotal,
      provisionedTotal: response.provisionedTotal,
    };
  }

  close(): void {
    this.client.close();
  }
}
