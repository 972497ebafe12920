import type { Scope } from '@agentroom/kit';

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
}

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
