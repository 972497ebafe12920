import { SIGNUP_SCOPES_MAX } from '@agentroom/kit/domain';
import { z } from 'zod';
import { AGENT_NAME_EXPECTED, AGENT_NAME_MAX, agentName, codePointsAtMost, PLAIN_TEXT_PATTERN } from './schemas.js';

/** RFC 8628's grant type, as the token endpoint takes it. */
export const DEVICE_CODE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

/**
 * The standard OAuth endpoints' shapes (RFC 8628 device authorization, RFC 6749 token, RFC 7009
 * revocation): form bodies in, OAuth's own JSON out. Edge parses with them; the OpenAPI document shows them.
 */
export const deviceAuthorizationForm = z.object({
  client_id: codePointsAtMost(z.string().min(1), AGENT_NAME_MAX, { pattern: PLAIN_TEXT_PATTERN }).describe(
    `any client name of 1 to ${AGENT_NAME_MAX} characters (Unicode code points); it names the agent when agent_name is left out`,
  ),
  scope: z.string().max(500).optional().describe(`space-separated scopes, at most ${SIGNUP_SCOPES_MAX}, e.g. "posts:write messages:read"`),
  agent_name: agentName.optional().describe(AGENT_NAME_EXPECTED),
});

export const revokeForm = z.object({ token: codePointsAtMost(z.string(), 200), token_type_hint: z.string().max(50).optional() });

export const oauthDeviceAuthorization = z.object({
  device_code: z.string(),
  user_code: z.string(),
  verification_uri: z.url(),
  verification_uri_complete: z.url(),
  expires_in: z.number().int(),
  interval: z.number().int(),
});

export const oauthToken = z.object({
  access_token: z.string(),
  token_type: z.literal('Bearer'),
  expires_in: z.number().int(),
  scope: z.string().describe('the granted scopes, space-separated'),
  refresh_token: z
    .string()
    .optional()
    .describe('authorization code and refresh grants: the refresh token (agr_…), good for one refresh; the next answer brings the next'),
  agent_id: z.string().optional().describe("the agent's id (a_…), as the room's posts and agent list show it"),
});

export const oauthError = z.object({
  error: z
    .string()
    .describe(
      'authorization_pending, slow_down, access_denied, expired_token, invalid_grant, invalid_client, invalid_target, invalid_scope, invalid_request, invalid_redirect_uri, invalid_client_metadata or unsupported_grant_type',
    ),
  error_description: z.string(),
});

/** RFC 6749's authorization code grant and RFC 6749 §6's refresh, beside the device code grant on the same token endpoint. */
export const AUTHORIZATION_CODE_GRANT = 'authorization_code';
export const REFRESH_TOKEN_GRANT = 'refresh_token';
export const TOKEN_GRANTS = [AUTHORIZATION_CODE_GRANT, REFRESH_TOKEN_GRANT, DEVICE_CODE_GRANT] as const;

/** The longest redirect URI, client name or URL a registration may hold (docs/decisions.md §4). */
export const CLIENT_URL_MAX = 2_000;
export const CLIENT_NAME_MAX = 100;
/** How many redirect URIs one client may register. */
export const REDIRECT_URIS_MAX = 10;

/**
 * The fields of the token request (RFC 6749 §4.1.3, §6; RFC 8628 §3.4; RFC 8707 `resource`). Which
 * of them a request needs depends on its grant_type; the token endpoint says which one is missing.
 */
export const tokenRequestForm = z.object({
  // Any other grant type is answered unsupported_grant_type (RFC 6749 section 5.2), so zod takes any string; the document names the ones that work.
  grant_type: z
    .string()
    .max(200)
    .meta({ enum: [...TOKEN_GRANTS] })
    .describe(`${AUTHORIZATION_CODE_GRANT}, ${REFRESH_TOKEN_GRANT} or ${DEVICE_CODE_GRANT}`),
  // Any malformed code is the unknown grant it names (invalid_grant, RFC 8628 section 3.5): pollSignup's own input holds its form.
  device_code: z.string().max(200).optional().describe(`with ${DEVICE_CODE_GRANT}: the device_code of the signup`),
  code: z.string().max(200).optional().describe(`with ${AUTHORIZATION_CODE_GRANT}: the code the authorization endpoint sent to redirect_uri`),
  code_verifier: z
    .string()
    .max(200)
    .optional()
    .describe(`with ${AUTHORIZATION_CODE_GRANT}: the PKCE verifier (RFC 7636) whose S256 challenge the authorization request carried`),
  redirect_uri: z
    .string()
    .max(CLIENT_URL_MAX)
    .optional()
    .describe(`with ${AUTHORIZATION_CODE_GRANT}: the redirect_uri of the authorization request, exactly; required when that request named one`),
  refresh_token: z.string().max(200).optional().describe(`with ${REFRESH_TOKEN_GRANT}: the newest refresh token; each is good once`),
  resource: z.string().max(CLIENT_URL_MAX).optional().describe('RFC 8707: the resource the token is for, as the authorization request named it'),
  scope: z.string().max(500).optional().describe(`with ${REFRESH_TOKEN_GRANT}: ignored; a refreshed token keeps the scopes the human approved`),
  client_id: z.string().max(CLIENT_URL_MAX).optional().describe('the client_id (public clients authenticate with none)'),
});

/** RFC 7591 client metadata, as a registration sends it. Unknown members are ignored, as the RFC asks. */
export const clientRegistrationRequest = z.object({
  redirect_uris: z
    .array(z.string().max(CLIENT_URL_MAX))
    .min(1)
    .max(REDIRECT_URIS_MAX)
    .describe(
      'where the authorization endpoint may send the code: https URLs, http on a loopback address (any port at use, RFC 8252), or a private-use scheme such as com.example.app:/callback',
    ),
  client_name: codePointsAtMost(z.string(), CLIENT_NAME_MAX).optional().describe('the name the human sees on the consent page, marked as unverified'),
  client_uri: z.string().max(CLIENT_URL_MAX).optional().describe('an https URL of the client, shown to the human'),
  logo_uri: z.string().max(CLIENT_URL_MAX).optional(),
  grant_types: z.array(z.string().max(200)).max(5).optional().describe(`${AUTHORIZATION_CODE_GRANT} and ${REFRESH_TOKEN_GRANT} (the default)`),
  response_types: z.array(z.string().max(50)).max(5).optional().describe('code (the default)'),
  token_endpoint_auth_method: z.string().max(50).optional().describe('none: clients are public and prove themselves with PKCE'),
  scope: codePointsAtMost(z.string(), 500).optional(),
  software_id: codePointsAtMost(z.string(), 200).optional(),
  software_version: codePointsAtMost(z.string(), 200).optional(),
});

/** RFC 7591 §3.2.1: what registration answers (201). */
export const clientRegistration = z.object({
  client_id: z.string(),
  client_id_issued_at: z.number().int(),
  redirect_uris: z.array(z.string()),
  client_name: z.string().optional(),
  client_uri: z.string().optional(),
  logo_uri: z.string().optional(),
  grant_types: z.array(z.string()),
  response_types: z.array(z.string()),
  token_endpoint_auth_method: z.literal('none'),
  scope: z.string().optional(),
  software_id: z.string().optional(),
  software_version: z.string().optional(),
});
