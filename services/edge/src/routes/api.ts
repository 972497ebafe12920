import { DomainError, type HealthStatus, parsePaging, type PublicUrls } from '@agentroom/kit';
import { Router } from 'express';
import { z } from 'zod';
import { principalOf, requireScope } from '../bearer.js';
import type { Agent, AgentList, Health, PostList, ServiceCheck } from '../api.js';
import type { MessagingGateway } from '../gateways/messaging.gateway.js';
import type { RoomGateway } from '../gateways/room.gateway.js';

export interface ApiDeps {
  room: RoomGateway;
  messaging: Pick<MessagingGateway, 'check'>;
  urls: PublicUrls;
  /** Edge's own storage (quotas): its kind, and a check that throws when it is unreachable. */
  storage: { kind: 'redis' | 'memory'; ping(): Promise<void> };
  version: string;
}

/** The versioned REST API, mounted at the path of `{base_url}`. */
export function apiRoutes(deps: ApiDeps): Router {
  const router = Router();

  router.get('/posts', async (req, res) => {
    const { limit, cursor } = parsePaging(req.query);
    const page = await deps.room.listPosts(limit, cursor);
    const body: PostList = { object: 'list', data: page.posts, has_more: page.hasMore, next_cursor: page.nextCursor };
    res.json(body);
  });

  // The author comes only from the token: whatever else the body says is ignored.
  const createPostBody = z.object({ text: z.string() });

  router.post('/posts', requireScope('posts:write', deps.urls), async (req, res) => {
    const parsed = createPostBody.safeParse(req.body);
    if (!parsed.success) {
      throw new DomainError('invalid-request', {
        detail: 'The body must be JSON with "text", a string.',
        remedy: 'Send Content-Type: application/json and {"text": "…"} with 1 to 500 characters.',
        extensions: { parameter: 'text' },
      });
    }
    const principal = principalOf(res);
    if (!principal) throw new Error('requireScope let a request without a principal through');
    const post = await deps.room.createPost(principal.agentId, parsed.data.text, 'rest');
    res.status(201).json(post);
  });

  // Agent ids the room makes are short and URL-safe; anything else cannot name an agent.
  const agentIdParam = z.string().regex(/^[A-Za-z0-9_-]{1,100}$/);

  router.get('/agents', async (req, res) => {
    const { limit } = parsePaging(req.query, { cursor: false });
    const page = await deps.room.listAgents(limit);
    const body: AgentList = { object: 'list', data: page.agents, has_more: page.hasMore };
    res.json(body);
  });

  // Profiles need agents:read (CONTRACT §11), while the list above stays open.
  router.get('/agents/:agentId', requireScope('agents:read', deps.urls), async (req, res) => {
    const agentId = agentIdParam.safeParse(req.params.agentId);
    if (!agentId.success) {
      throw new DomainError('agent-not-found', {
        detail: 'No agent has this id.',
        remedy: `List the agents with GET ${deps.urls.baseUrl}/agents and use one of their ids.`,
      });
    }
    const agent: Agent = await deps.room.getAgent(agentId.data);
    res.json(agent);
  });

  router.get('/health', async (_req, res) => {
    const [storage, room, messaging] = await Promise.all([storageCheck(deps.storage), deps.room.check(), deps.messaging.check()]);
    const checks = { storage, room: serviceCheck(room), messaging: serviceCheck(messaging) };
    const healthy = storage === 'ok' && checks.room === 'serving' && checks.messaging === 'serving';
    const body: Health = {
      status: healthy ? 'healthy' : 'degraded',
      storage: deps.storage.kind,
      checks,
      version: deps.version,
    };
    res.status(healthy ? 200 : 503).json(body);
  });

  return router;
}

function serviceCheck(status: HealthStatus): ServiceCheck {
  return status === 'SERVING' ? 'serving' : status === 'UNREACHABLE' ? 'unreachable' : 'not_serving';
}

async function storageCheck(storage: ApiDeps['storage']): Promise<Health['checks']['storage']> {
  if (storage.kind === 'memory') return 'memory';
  try {
    await storage.ping();
    return 'ok';
  } catch {
    return 'down';
  }
}
