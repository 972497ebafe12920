import type { ProblemSlug } from '@agentroom/kit/problems';
import { type Response, Router } from 'express';
import { AUTHORIZATION_CODE_GRANT, DEVICE_CODE_GRANT, deviceAuthorizationForm, REFRESH_TOKEN_GRANT, revokeForm, tokenRequestForm } from '@agentroom/api';
import type { Core } from '../operations/core.js';
import type { Surface } from '../operations/surface.js';
import type { Problem } from '../operations/problem.js';
import { admissionOf, otherMethods, sendProblem } from '../http/answers.js';

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
  // The authorization code and refresh grants (RFC 6749 §5.2, RFC 8707 §2) and registration (RFC 7591 §3.2.2).
  'invalid-grant': 'invalid_grant',
  'invalid-client': 'invalid_client',
  'invalid-target': 'invalid_target',
  'invalid-redirect-uri': 'invalid_redirect_uri',
  'invalid-client-metadata': 'invalid_client_metadata',
};

/** Answers a failure the OAuth way when OAuth has a word for it, as a problem document otherwise. */
function sendFailure(res: Response, problem: Problem): void {
  const code = OAUTH_ERRORS[problem.error.slug];
  if (code === undefined) return sendProblem(res, problem);
  const retryAfter = problem.headers['Retry-After'];
  // RFC 6749 §5.2: a client that is not known is 401; every other OAuth error 400.
  oauthError(
    res,
    code === 'invalid_client' ? 401 : 400,
    code,
    problem.document.detail ?? problem.document.title,
    retryAfter === undefined ? {} : { 'Retry-After': retryAfter },
  );
}

/** A JSON body as an object, or undefined when it is none (a form, raw bytes, an array). */
function jsonOf(body: unknown): Record<string, unknown> | undefined {
  return typeof body === 'object' && body !== null && !Buffer.isBuffer(body) && !Array.isArray(body) ? (body as Record<string, unknown>) : undefined;
}

function formOf(body: unknown): Record<string, unknown> {
  return typeof body === 'object' && body !== null && !Buffer.isBuffer(body) ? (body as Record<string, unknown>) : {};
}

/**
 * The standard OAuth endpoints (docs/decisions.md §4), so off-the-shelf OAuth clients work unchanged: device
 * authorization, token (device code, authorization code, refresh), registration, revocation. They are one more adapter over the same operations as
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
    const form = tokenRequestForm.safeParse(formOf(req.body));
    if (!form.success) {
      const field = String(form.error.issues[0]?.path[0] ?? 'grant_type');
      oauthError(
        res,
        400,
        'invalid_request',
        `${field} is malformed or too long. Send application/x-www-form-urlencoded with grant_type and the fields of that grant.`,
      );
      return;
    }
    const { grant_type: grant } = form.data;
    if (grant === AUTHORIZATION_CODE_GRANT || grant === REFRESH_TOKEN_GRANT) {
      const needed = grant === AUTHORIZATION_CODE_GRANT ? (['code', 'code_verifier'] as const) : (['refresh_token'] as const);
      const missing = needed.find((name) => !form.data[name]);
      if (missing !== undefined) {
        oauthError(
          res,
          400,
          'invalid_request',
          `${missing} is missing: the ${grant} grant takes ${needed.join(' and ')}${grant === AUTHORIZATION_CODE_GRANT ? ' (PKCE)' : ''}, with client_id.`,
        );
        return;
      }
      const { device_code: _device, scope: _scope, ...input } = form.data;
      const outcome = await core.invoke(admissionOf(res), 'exchangeToken', { ...input, grant_type: grant }, { surface });
      if (!outcome.ok) return sendFailure(res, outcome.problem);
      res.setHeader('Cache-Control', 'no-store');
      res.json(outcome.output);
      return;
    }
    if (grant !== DEVICE_CODE_GRANT) {
      oauthError(res, 400, 'unsupported_grant_type', `Only ${AUTHORIZATION_CODE_GRANT}, ${REFRESH_TOKEN_GRANT} and ${DEVICE_CODE_GRANT} are supported.`);
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
    res.json({
      access_token: result.access_token,
      token_type: 'Bearer',
      expires_in: result.expires_in,
      scope: result.scopes.join(' '),
      agent_id: result.agent_id,
    });
  });

  // RFC 7591 dynamic registration, for MCP hosts without a client metadata document.
  router.post('/register', async (req, res) => {
    const body = jsonOf(req.body);
    if (body === undefined || !(req.headers['content-type'] ?? '').toLowerCase().includes('json')) {
      oauthError(res, 400, 'invalid_client_metadata', 'Send the client metadata as a JSON object (Content-Type: application/json), with redirect_uris.');
      return;
    }
    const outcome = await core.invoke(admissionOf(res), 'registerClient', body, { surface });
    if (!outcome.ok) {
      // A field the shape refuses is invalid client metadata (RFC 7591 §3.2.2), redirect URIs their own error.
      if (outcome.problem.error.slug === 'invalid-request') {
        const parameter = outcome.problem.error.fields.parameter ?? 'body';
        const code = parameter === 'redirect_uris' ? 'invalid_redirect_uri' : 'invalid_client_metadata';
        oauthError(res, 400, code, `${parameter}: ${outcome.problem.error.fields.expected ?? outcome.problem.document.detail ?? 'not valid'}`);
        return;
      }
      return sendFailure(res, outcome.problem);
    }
    res.setHeader('Cache-Control', 'no-store');
    res.status(201).json(outcome.output);
  });

  router.post('/revoke', async (req, res) => {
    const form = revokeForm.safeParse(formOf(req.body));
    if (!form.success) {
      oauthError(res, 400, 'invalid_request', 'Send application/x-www-form-urlencoded with token.');
      return;
    }
    // RFC 7009 §2.2: unknown or already revoked tokens answer 200 too.
    const outcome = await core.invoke(admissionOf(res), 'revokeToken', { token: form.data.token }, { surface });
    if (!outcome.ok) return sendProblem(res, outcome.problem);
    res.status(200).end();
  });

  // Each endpoint takes POST only: the URLs the metadata names answer any other method with 405 and Allow.
  for (const path of ['/device_authorization', '/token', '/register', '/revoke']) router.all(path, otherMethods(core, surface, ['POST']));

  return router;
}
