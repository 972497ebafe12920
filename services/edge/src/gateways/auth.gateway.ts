import * as grpc from '@grpc/grpc-js';
import { CLIENT_OPTIONS, type Scope, unaryCall } from '@agentroom/kit';
import {
  type AuthenticateTokenResponse__Output,
  authProto,
  type AuthServiceClient,
  type PollDeviceFlowResponse__Output,
  type ResolveSessionResponse__Output,
  type RevokeTokenResponse__Output,
  type StartDeviceFlowResponse__Output,
} from '@agentroom/proto';

/** Who a valid bearer token speaks for. */
export interface Principal {
  tokenId: string;
  agentId: string;
  agentName: string;
  humanLabel: string;
  scopes: Scope[];
  expiresAt: string;
}

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
  /** The agents the human approved that hold a live token, with the union of its scopes. */
  agents: { agentId: string; agentName: string; scopes: Scope[] }[];
}

export type DeviceFlowPoll =
  | { status: 'pending' }
  | { status: 'completed'; accessToken: string; scopes: Scope[]; human: string; agentId: string; expiresIn: number };

/** The auth service as edge sees it: typed Promises with a deadline on every call. */
export class AuthGateway {
  private readonly client: AuthServiceClient;

  constructor(
    address: string,
    private readonly deadlineMs: number,
  ) {
    const AuthService = authProto().AuthService;
    this.client = new AuthService(address, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
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
    );
    return {
      tokenId: response.tokenId,
      agentId: response.agentId,
      agentName: response.agentName,
      humanLabel: response.humanLabel,
      scopes: response.scopes as Scope[],
      expiresAt: response.expiresAt,
    };
  }

  async revoke(token: string): Promise<void> {
    await unaryCall<RevokeTokenResponse__Output>(this.deadlineMs, (metadata, options, callback) =>
      this.client.revokeToken({ token }, metadata, options, callback),
    );
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
      agents: response.agents.map((agent) => ({ agentId: agent.agentId, agentName: agent.agentName, scopes: agent.scopes as Scope[] })),
    };
  }

  close(): void {
    this.client.close();
  }
}
