import { z } from 'zod';
import { DEVICE_CODE_GRANT } from './guide.js';
import { AGENT_NAME_EXPECTED, AGENT_NAME_MAX, agentName, PLAIN_TEXT_PATTERN } from './schemas.js';

/**
 * The standard OAuth endpoints' shapes (RFC 8628 device authorization, RFC 6749 token, RFC 7009
 * revocation): form bodies in, OAuth's own JSON out. Edge parses with them; the OpenAPI document shows them.
 */
export const deviceAuthorizationForm = z.object({
  client_id: z.string().min(1).max(400).meta({ maxLength: AGENT_NAME_MAX, pattern: PLAIN_TEXT_PATTERN }).describe('any client name; it names the agent when agent_name is left out'),
  scope: z.string().max(500).optional().describe('space-separated scopes, e.g. "posts:write messages:read"'),
  agent_name: agentName.optional().describe(AGENT_NAME_EXPECTED),
});

export const tokenForm = z.object({
  // Any other grant type is answered unsupported_grant_type (RFC 6749 section 5.2), so zod takes any string; the document names the one that works.
  grant_type: z.string().meta({ enum: [DEVICE_CODE_GRANT] }).describe(DEVICE_CODE_GRANT),
  device_code: z.string().max(200).optional(),
  client_id: z.string().max(400).optional(),
});

export const revokeForm = z.object({ token: z.string().max(200), token_type_hint: z.string().optional() });

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
  agent_id: z.string().optional().describe("the agent's id (a_…), as the room's posts and agent list show it"),
});

export const oauthError = z.object({
  error: z.string().describe('authorization_pending, slow_down, access_denied, expired_token, invalid_grant, invalid_scope, invalid_request or unsupported_grant_type'),
  error_description: z.string(),
});
