import { DomainError, type PublicUrls, SCOPES } from '@agentroom/kit';
import { type Response, Router } from 'express';
import { z } from 'zod';
import type { AuthGateway } from '../gateways/auth.gateway.js';

/** RFC 8628 §3.4's grant type. */
export const DEVICE_CODE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

const deviceAuthorizationForm = z.object({
  client_id: z.string().min(1).max(200),
  scope: z.string().max(500).optional(),
  agent_name: z.string().max(200).optional(),
});

const tokenForm = z.object({
  grant_type: z.string(),
  device_code: z.string().max(200).optional(),
  client_id: z.string().max(200).optional(),
});

const revokeForm = z.object({ token: z.string().max(200), token_type_hint: z.string().optional() });

/** OAuth errors are their own JSON shape (RFC 6749 §5.2), not problem documents. */
function oauthError(res: Response, status: number, error: string, description: string, headers: Record<string, string> = {}): void {
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  res.setHeader('Cache-Control', 'no-store');
  res.status(status).json({ error, error_description: description });
}

// How each problem of the device flow reads as an RFC 8628 token error.
const TOKEN_ERRORS: Partial<Record<string, string>> = {
  'signup-declined': 'access_denied',
  'signup-expired': 'expired_token',
  'signup-unknown': 'invalid_grant',
  'slow-down': 'slow_down',
  'invalid-scope': 'invalid_scope',
};

function formOf(body: unknown): Record<string, unknown> {
  return typeof body === 'object' && body !== null && !Buffer.isBuffer(body) ? (body as Record<string, unknown>) : {};
}

/**
 * The standard endpoints over the same flow records as /agent/signup (CONTRACT §4), so
 * off-the-shelf OAuth clients work unchanged: device authorization, token, revocation.
 */
export function oauthRoutes(deps: { auth: AuthGateway; urls: PublicUrls }): Router {
  const router = Router();
  const { auth, urls } = deps;

  router.post('/device_authorization', async (req, res) => {
    const form = deviceAuthorizationForm.safeParse(formOf(req.body));
    if (!form.success) {
      oauthError(res, 400, 'invalid_request', 'Send application/x-www-form-urlencoded with client_id and a space-separated scope.');
      return;
    }
    const scopes = (form.data.scope ?? '').split(' ').filter(Boolean);
    const unknown = scopes.filter((scope) => !(SCOPES as readonly string[]).includes(scope));
    if (scopes.length === 0 || unknown.length > 0) {
      oauthError(res, 400, 'invalid_scope', `scope must name one or more of: ${SCOPES.join(' ')}.`);
      return;
    }
    const flow = await auth.startDeviceFlow({ scopes, agentName: form.data.agent_name ?? '', clientId: form.data.client_id, bearerToken: '' });
    res.setHeader('Cache-Control', 'no-store');
    res.json({
      device_code: flow.deviceCode,
      user_code: flow.userCode,
      verification_uri: `${urls.siteUrl}/device`,
      verification_uri_complete: `${urls.siteUrl}/device?user_code=${flow.userCode}`,
      expires_in: flow.expiresIn,
      interval: flow.interval,
    });
  });

  router.post('/token', async (req, res) => {
    const form = tokenForm.safeParse(formOf(req.body));
    if (!form.success) {
      oauthError(res, 400, 'invalid_request', 'Send application/x-www-form-urlencoded with grant_type and device_code.');
      return;
    }
    if (form.data.grant_type !== DEVICE_CODE_GRANT) {
      oauthError(res, 400, 'unsupported_grant_type', `Only ${DEVICE_CODE_GRANT} is supported.`);
      return;
    }
    if (!form.data.device_code) {
      oauthError(res, 400, 'invalid_request', 'device_code is missing.');
      return;
    }
    try {
      const result = await auth.pollDeviceFlow(form.data.device_code);
      if (result.status === 'pending') {
        oauthError(res, 400, 'authorization_pending', 'The human has not approved yet; poll again after `interval` seconds.');
        return;
      }
      res.setHeader('Cache-Control', 'no-store');
      res.json({ access_token: result.accessToken, token_type: 'Bearer', expires_in: result.expiresIn, scope: result.scopes.join(' ') });
    } catch (error) {
      const code = error instanceof DomainError ? TOKEN_ERRORS[error.slug] : undefined;
      if (!(error instanceof DomainError) || code === undefined) throw error;
      oauthError(res, 400, code, error.detail ?? error.message, error.headers);
    }
  });

  router.post('/revoke', async (req, res) => {
    const form = revokeForm.safeParse(formOf(req.body));
    if (!form.success) {
      oauthError(res, 400, 'invalid_request', 'Send application/x-www-form-urlencoded with token.');
      return;
    }
    // RFC 7009 §2.2: unknown or already revoked tokens answer 200 too.
    await auth.revoke(form.data.token);
    res.status(200).end();
  });

  return router;
}
