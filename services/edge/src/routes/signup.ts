import { DomainError, type PublicUrls, SCOPES } from '@agentroom/kit';
import { Router } from 'express';
import { z } from 'zod';
import { bearerToken } from '../bearer.js';
import type { AuthGateway } from '../gateways/auth.gateway.js';

const startBody = z.object({
  scopes: z.array(z.string()).min(1),
  agent_name: z.string().max(200).optional(),
});

const pollQuery = z.object({ device_code: z.string().min(1).max(200) });

export function invalidScopes(detail: string): DomainError {
  return new DomainError('invalid-scope', {
    detail,
    remedy: `Send scopes as a non-empty array of: ${SCOPES.join(', ')}; ask for the fewest you need.`,
    extensions: { valid_scopes: [...SCOPES] },
  });
}

/** The specification's device flow for agents: startSignup and pollSignup, under `{api_url}/agent/signup`. */
export function signupRoutes(deps: { auth: AuthGateway; urls: PublicUrls }): Router {
  const router = Router();
  const { auth, urls } = deps;

  router.post('/start', async (req, res) => {
    const parsed = startBody.safeParse(req.body);
    if (!parsed.success) throw invalidScopes('The body must be JSON with "scopes": a non-empty array of scope names.');
    const unknown = parsed.data.scopes.filter((scope) => !(SCOPES as readonly string[]).includes(scope));
    if (unknown.length > 0) throw invalidScopes(`Unknown scopes: ${unknown.map((s) => JSON.stringify(s)).join(', ')}.`);
    const flow = await auth.startDeviceFlow({
      scopes: parsed.data.scopes,
      agentName: parsed.data.agent_name ?? '',
      clientId: '',
      // With a live token, the flow widens that agent rather than making a new one (CONTRACT §3).
      bearerToken: bearerToken(req, urls) ?? '',
    });
    res.json({
      device_code: flow.deviceCode,
      user_code: flow.userCode,
      verification_uri: `${urls.siteUrl}/device`,
      verification_uri_complete: `${urls.siteUrl}/device?user_code=${flow.userCode}`,
      expires_in: flow.expiresIn,
      interval: flow.interval,
      scopes: flow.scopes,
    });
  });

  router.get('/poll', async (req, res) => {
    const parsed = pollQuery.safeParse(req.query);
    if (!parsed.success) {
      throw new DomainError('invalid-request', {
        detail: 'device_code is missing.',
        remedy: 'Pass the device_code of POST /agent/signup/start as ?device_code=…',
        extensions: { parameter: 'device_code' },
      });
    }
    const result = await auth.pollDeviceFlow(parsed.data.device_code);
    if (result.status === 'pending') {
      res.status(202).json({ status: 'pending' });
      return;
    }
    // The token is shown once; nothing between here and the agent may keep a copy.
    res.setHeader('Cache-Control', 'no-store');
    res.json({ status: 'completed', access_token: result.accessToken, token_type: 'Bearer', scopes: result.scopes, human: result.human });
  });

  return router;
}
