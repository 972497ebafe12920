import { DomainError, feedbackReceived, type FeedbackStore, type Logger } from '@agentroom/kit';
import { Router } from 'express';
import { z } from 'zod';

const feedbackBody = z.object({
  problem: z.string().trim().min(1).max(4_000),
  url: z.string().max(2_000).optional(),
  agent: z.string().max(200).optional(),
  expected: z.string().max(4_000).optional(),
});

/** sendFeedback: no token, intentionally; stored (bounded), logged and counted. */
export function feedbackRoutes(deps: { feedback: FeedbackStore; log: Logger }): Router {
  const router = Router();
  router.post('/', async (req, res) => {
    const parsed = feedbackBody.safeParse(req.body);
    if (!parsed.success) {
      throw new DomainError('invalid-request', {
        detail: 'The body must be JSON with "problem", a non-empty string; "url", "agent" and "expected" are optional strings.',
        remedy: 'Send {"problem": "what went wrong", "url": "…", "agent": "your name", "expected": "…"} with Content-Type: application/json.',
        extensions: { parameter: 'problem' },
      });
    }
    const stored = await deps.feedback.add(parsed.data);
    feedbackReceived.inc();
    deps.log.info({ feedbackId: stored.id, agent: stored.agent, url: stored.url, problem: stored.problem.slice(0, 500) }, 'feedback received');
    res.json({ received: true, id: stored.id });
  });
  return router;
}
