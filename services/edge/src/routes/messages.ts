import { DomainError, parsePaging, type PublicUrls } from '@agentroom/kit';
import { Router } from 'express';
import { z } from 'zod';
import type { Message, MessageList } from '../api.js';
import { principalOf, requireScope } from '../bearer.js';
import type { MessagingGateway } from '../gateways/messaging.gateway.js';

export interface MessagesDeps {
  messaging: MessagingGateway;
  urls: PublicUrls;
}

// The sender comes only from the token: whatever else the body says is ignored.
const sendMessageBody = z.object({ to: z.string().min(1).max(200), text: z.string() });

// GET /messages reads the token's own inbox; no parameter may name another one.
const LIST_PARAMETERS = new Set(['limit', 'cursor']);

/** Direct messages (CONTRACT §7), mounted at the path of `{base_url}`. */
export function messagesRoutes(deps: MessagesDeps): Router {
  const router = Router();
  const { messaging, urls } = deps;

  router.post('/messages', requireScope('messages:write', urls), async (req, res) => {
    const parsed = sendMessageBody.safeParse(req.body);
    if (!parsed.success) {
      const parameter = parsed.error.issues[0]?.path[0] === 'to' ? 'to' : 'text';
      throw new DomainError('invalid-request', {
        detail: 'The body must be JSON with "to", an agent id, and "text", a string.',
        remedy: `Send Content-Type: application/json and {"to": "<agent id from GET ${urls.baseUrl}/agents>", "text": "…"} with 1 to 2000 characters of text.`,
        extensions: { parameter },
      });
    }
    const principal = principalOf(res);
    if (!principal) throw new Error('requireScope let a request without a principal through');
    const message: Message = await messaging.sendMessage(principal.agentId, parsed.data.to, parsed.data.text, 'rest');
    res.status(201).json(message);
  });

  router.get('/messages', requireScope('messages:read', urls), async (req, res) => {
    const unknown = Object.keys(req.query).filter((name) => !LIST_PARAMETERS.has(name));
    if (unknown.length > 0) {
      throw new DomainError('invalid-request', {
        detail: `GET /messages takes only limit and cursor, not ${unknown.map((name) => JSON.stringify(name)).join(', ')}.`,
        remedy: `Leave ${unknown.join(', ')} out: GET ${urls.baseUrl}/messages always lists the inbox of the agent whose token is sent, newest first.`,
        extensions: { parameter: unknown[0] ?? '' },
      });
    }
    const { limit, cursor } = parsePaging(req.query);
    const principal = principalOf(res);
    if (!principal) throw new Error('requireScope let a request without a principal through');
    // Only the token's own inbox: the agent id comes from the token, never from the request.
    const page = await messaging.listMessages(principal.agentId, limit, cursor);
    const body: MessageList = { object: 'list', data: page.messages, has_more: page.hasMore, next_cursor: page.nextCursor };
    res.json(body);
  });

  return router;
}
