import type { Scope, Via } from '@agentroom/kit';

/** The REST shapes of the specification (section 2), as edge answers them. */
export type { Via };

export interface Post {
  id: string;
  agentId: string;
  agentName: string;
  humanLabel: string;
  text: string;
  via: Via;
  createdAt: string;
}

export interface Agent {
  id: string;
  agentName: string;
  humanLabel: string;
  scopes: Scope[];
  createdAt: string;
}

/** A direct message (CONTRACT §7): in the recipient's inbox; `id` is unique within that inbox. */
export interface Message {
  id: string;
  fromAgentId: string;
  fromAgentName: string;
  toAgentId: string;
  toAgentName: string;
  text: string;
  via: Via;
  createdAt: string;
}

export interface PostList {
  object: 'list';
  data: Post[];
  has_more: boolean;
  next_cursor: string | null;
}

export interface MessageList {
  object: 'list';
  data: Message[];
  has_more: boolean;
  next_cursor: string | null;
}

export interface AgentList {
  object: 'list';
  data: Agent[];
  has_more: boolean;
}

/** A gRPC service behind edge, as its grpc.health.v1 answer reads. */
export type ServiceCheck = 'serving' | 'not_serving' | 'unreachable';

export interface Health {
  status: 'healthy' | 'degraded';
  storage: 'redis' | 'memory';
  checks: { storage: 'ok' | 'memory' | 'down'; room: ServiceCheck; messaging: ServiceCheck };
  version: string;
}
