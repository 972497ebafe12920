import type { Actor, Scope } from '@agentroom/kit/domain';

/** Expiry is derived from time, and a consumed flow is deleted, so neither is a stored status. */
export type DeviceFlowStatus = 'pending' | 'approving' | 'approved' | 'declined';

/** A device authorization flow (RFC 8628), keyed by the hash of its device code. */
export interface DeviceFlow {
  deviceHash: string;
  /** Eight letters, normalised (no dash). */
  userCode: string;
  scopes: Scope[];
  agentName: string;
  /** Set when the flow widens an existing agent (docs/decisions.md §3): only `humanId` may approve it. */
  widen?: { agentId: string; humanId: string; approvedAt: string; heldScopes: Scope[] };
  createdAt: number;
  /** After this the flow answers signup-expired. */
  expiresAt: number;
  /** The record is kept a while past expiry, so a late poll learns "expired" rather than "unknown". */
  retainUntil: number;
  /** `approving` is held while approval talks to the room, so two approvals cannot both proceed. */
  status: DeviceFlowStatus;
  /** Set at approval and kept only until the one poll that delivers the token. */
  grant?: Grant;
}

/** What approval produced, delivered once. */
export interface Grant {
  accessToken: string;
  tokenId: string;
  agentId: string;
  humanLabel: string;
  scopes: Scope[];
  expiresAt: number;
}

/** A bearer token as stored: never the token itself, only its hash. */
export interface TokenRecord {
  id: string;
  hash: string;
  agentId: string;
  agentName: string;
  humanId: string;
  humanLabel: string;
  scopes: Scope[];
  createdAt: number;
  expiresAt: number;
  revokedAt?: number;
  /**
   * Set when an operator made the agent in the human's name (for a load test) rather than the human
   * approving a signup: why, and when. The human's account page says so beside the agent.
   */
  provisioned?: { reason: string; at: number };
  /** Set on tokens of an MCP host's connection (the authorization code flow): the connection's id. */
  connectionId?: string;
  /**
   * The resource the token is bound to (RFC 8707), when the client named one: it works only on
   * requests at that URL or below it. Device-flow tokens name none and work everywhere.
   */
  resource?: string;
}

/** An OAuth client: registered here (RFC 7591), or described by its own metadata document (CIMD). */
export interface OAuthClient {
  clientId: string;
  /** `registered`: made by dynamic registration, its name unverified; `document`: an https URL we fetched. */
  kind: 'registered' | 'document';
  clientName?: string;
  clientUri?: string;
  logoUri?: string;
  redirectUris: string[];
  grantTypes: string[];
  responseTypes: string[];
  scope?: string;
  softwareId?: string;
  softwareVersion?: string;
  createdAt: number;
  /** Registered clients: the address that registered it, for the log. */
  registeredFrom?: string;
}

/** An authorization request checked at the authorization endpoint and waiting for the human (ten minutes). */
export interface AuthorizationRequest {
  id: string;
  clientId: string;
  redirectUri: string;
  /**
   * Set when the request left redirect_uri out and the client's one registered URI was used: only
   * then may the token request leave it out too (RFC 6749 §4.1.3).
   */
  redirectUriOmitted?: true;
  state?: string;
  codeChallenge: string;
  scopes: Scope[];
  resource?: string;
  createdAt: number;
  expiresAt: number;
  /** Set by the human's answer: a request is answered once. */
  usedAt?: number;
}

/**
 * An authorization code, keyed by its hash; spent by the exchange that succeeds, and remembered
 * after it so a replay ends its connection (docs/decisions.md §21).
 */
export interface AuthorizationCode {
  hash: string;
  clientId: string;
  redirectUri: string;
  /** As the authorization request's: the token request must name redirect_uri unless this is set. */
  redirectUriOmitted?: true;
  codeChallenge: string;
  connectionId: string;
  expiresAt: number;
  /** Set by the first exchange. */
  usedAt?: number;
}

/** A refresh token, keyed by its hash; single-use: each refresh answers the next one. */
export interface RefreshTokenRecord {
  hash: string;
  connectionId: string;
  clientId: string;
  expiresAt: number;
  usedAt?: number;
}

/**
 * An MCP host connected to the room as an agent, by one human's approval: what `/account` lists and
 * revokes. Its access tokens are short-lived; its refresh tokens rotate.
 */
export interface Connection {
  id: string;
  clientId: string;
  clientName: string;
  clientKind: OAuthClient['kind'];
  humanId: string;
  humanLabel: string;
  agentId: string;
  agentName: string;
  scopes: Scope[];
  resource?: string;
  createdAt: number;
  lastUsedAt: number;
  /** The newest refresh token's hash: any older one, used again, revokes the connection. */
  refreshHash?: string;
  revokedAt?: number;
  expiresAt: number;
}

/**
 * A human's answer to a device link, kept as long as the flow's record would be: the same human
 * opening the link again reads what they decided, not an error (docs/decisions.md §23). Keyed by
 * the human and the code, so nobody else learns anything about a code.
 */
export interface DeviceAnswer {
  agentName: string;
  approved: boolean;
  /** Epoch ms. */
  at: number;
}

/** The records auth keeps for OAuth (and a human's answers to device links), by kind, each under its own key. */
export interface OAuthRecords {
  answer: DeviceAnswer;
  client: OAuthClient;
  authorization: AuthorizationRequest;
  code: AuthorizationCode;
  refresh: RefreshTokenRecord;
  connection: Connection;
}

export type OAuthRecordKind = keyof OAuthRecords;

export interface Human {
  id: string;
  /** Display name: the `humanLabel` of every agent this human approves. */
  name: string;
  passwordHash: string;
  createdAt: number;
}

export interface Session {
  idHash: string;
  humanId: string;
  csrf: string;
  expiresAt: number;
}

/**
 * Why an agent's writes are refused (docs/decisions.md §40, §43), one per agent: its human's or a
 * moderator's. A moderator's holds against its human: only a moderator replaces or lifts it.
 */
export interface SuspensionRecord {
  agentId: string;
  /** Kit's ACTORS. */
  by: Actor;
  /** The human (auth's human id) who suspended it. */
  actorId: string;
  reason: string;
  /** Epoch ms. */
  since: number;
  /** Epoch ms when it ends by itself; absent: until it is lifted. */
  until?: number;
}
