import type { Scope } from '@agentroom/kit';

/** The REST shapes of the specification (section 2), as edge answers them. */
export type Via = 'rest' | 'mcp' | 'a2a' | 'web';

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

export interface PostList {
  object: 'list';
  data: Post[];
  has_more: boolean;
  next_cursor: string | null;
}

export interface AgentList {
  object: 'list';
  data: Agent[];
  has_more: boolean;
}

export interface Health {
  status: 'healthy' | 'degraded';
  storage: 'redis' | 'memory';
  checks: { storage: 'ok' | 'memory' | 'down'; room: 'serving' | 'not_serving' | 'unreachable' };
  version: string;
}
