import type { ProblemSlug } from '@agentroom/kit';
import { type Response, Router } from 'express';
import { DEVICE_CODE_GRANT, deviceAuthorizationForm, revokeForm, tokenForm } from '@agentroom/api';
import type { Core } from '../operations/core.js';
import type { Surface } from '../operations/surface.js';
import type { Problem } from '../operations/problem.js';
import { admissionOf, sendRestProblem } from '../rest/routes.js';

/** OAuth errors are their own JSON shape (RFC 6749 §5.2), not problem documents. */
function oauthError(res: Response, status: number, error: string, description: string, headers: Record<string, string> = {}): void {
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  res.setHeader('Cache-Control', 'no-store');
  res.status(status).json({ error, error_description: description });
}

// How the problems of the device flow read as RFC 8628 / RFC 6749 errors; any other is a problem document.
const OAUTH_ERRORS: Partial<Record<ProblemSlug, string>> = {
  'signup-declined': 'access_denied',
  'signup-expired': 'expired_token',
  'signup-unknown': 'invalid_grant',
  'slow-down': 'slow_down',
  'invalid-scope': 'invalid_scope',
  'invalid-request': 'invalid_request',
};

/** Answers a failure the OAuth way when OAuth has a word for it, as a problem document otherwise. */
function sendFailure(res: Response, problem: Problem): void {
  const code = OAUTH_ERRORS[problem.error.slug];
  if (code === undefined) return sendRestProblem(res, problem);
  const retryAfter = problem.headers['Retry-After'];
  oauthError(res, 400, code, problem.document.detail ?? problem.document.title, retryAfter === undefined ? {} : { 'Retry-After': retryAfter });
}

function formOf(body: unknown): Record<string, unknown> {
  return typeof body === 'object' && body !== null && !Buffer.isBuffer(body) ? (body as Record<string, unknown>) : {};
}

/**
 * The standard OAuth endpoints (docs/decisions.md §4), so off-the-shelf OAuth clients work unchanged: device
 * authorization, token, revocation. They are one more adapter over the same operations as
 * `/agent/signup`, with OAuth's form bodies and error shape.
 */
export function oauthRoutes(core: Core, surface: Surface): Router {
  const router = Router();

  router.post('/device_authorization', async (req, res) => {
    const form = deviceAuthorizationForm.safeParse(formOf(req.body));
    if (!form.success) {
      // Name the field that is wrong and what is valid there, as a problem's remedy would.
      const field = form.error.issues[0]?.path[0];
      const expected = typeof field === 'string' ? deviceAuthorizationForm.shape[field as keyof typeof deviceAuthorizationForm.shape]?.description : undefined;
      const about = typeof field === 'string' && expected !== undefined ? `${field} must be ${expected}. ` : '';
      oauthError(res, 400, 'invalid_request', `${about}Send application/x-www-form-urlencoded with client_id and a space-separated scope.`);
      return;
    }
    const input = {
      scopes: (form.data.scope ?? '').split(' ').filter(Boolean),
      client_id: form.data.client_id,
      ...(form.data.agent_name === undefined ? {} : { agent_name: form.data.agent_name }),
    };
    const outcome = await core.invoke(admissionOf(res), 'startSignup', input, { surface });
    if (!outcome.ok) return sendFailure(res, outcome.problem);
    const { scopes: _scopes, ...flow } = outcome.output;
    res.setHeader('Cache-Control', 'no-store');
    res.json(flow);
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
    const outcome = await core.invoke(admissionOf(res), 'pollSignup', { device_code: form.data.device_code }, { surface });
    if (!outcome.ok) return sendFailure(res, outcome.problem);
    const result = outcome.output;
    if (result.status === 'pending') {
      oauthError(res, 400, 'authorization_pending', 'The human has not approved yet; poll again after `interval` seconds.');
      return;
    }
    res.setHeader('Cache-Control', 'no-store');
    res.json({ access_token: result.access_token, token_type: 'Bearer', expires_in: result.expires_in, scope: result.scopes.join(' '), agent_id: result.agent_id });
  });

  router.post('/revoke', async (req, res) => {
    const form = revokeForm.safeParse(formOf(req.body));
    if (!form.success) {
      oauthError(res, 400, 'invalid_request', 'Send application/x-www-form-urlencoded with token.');
      return;
    }
    // RFC 7009 §2.2: unknown or already revoked tokens answer 200 too.
    const outcome = await core.invoke(admissionOf(res), 'revokeToken', { token: form.data.token }, { surface });
    if (!outcome.ok) return sendRestProblem(res, outcome.problem);
    res.status(200).end();
  });

  return router;
}
