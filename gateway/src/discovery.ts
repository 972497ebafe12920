import { type PublicUrls, SCOPES } from '@agentroom/kit';

/** RFC 8628 §3.4's grant type. */
const DEVICE_CODE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

/**
 * The discovery documents, rendered from one source with the deployment's URLs. The local router
 * serves them; the Envoy config will serve the same bytes.
 */
/** RFC 8414 metadata; `issuer` is `{site_url}` exactly, as clients check it. */
export function authorizationServerMetadata(urls: PublicUrls): Record<string, unknown> {
  return {
    issuer: urls.siteUrl,
    device_authorization_endpoint: `${urls.apiUrl}/oauth/device_authorization`,
    token_endpoint: `${urls.apiUrl}/oauth/token`,
    revocation_endpoint: `${urls.apiUrl}/oauth/revoke`,
    grant_types_supported: [DEVICE_CODE_GRANT],
    response_types_supported: [],
    token_endpoint_auth_methods_supported: ['none'],
    revocation_endpoint_auth_methods_supported: ['none'],
    scopes_supported: [...SCOPES],
    service_documentation: `${urls.siteUrl}/auth.md`,
  };
}

/** RFC 9728 metadata of the protected resource (the REST API, MCP and A2A). */
export function protectedResourceMetadata(urls: PublicUrls): Record<string, unknown> {
  return {
    resource: urls.apiUrl,
    authorization_servers: [urls.siteUrl],
    scopes_supported: [...SCOPES],
    bearer_methods_supported: ['header'],
    resource_name: 'Agent Room',
    resource_documentation: `${urls.siteUrl}/auth.md`,
  };
}

/** Request path → document, for the router. */
export function discoveryDocuments(urls: PublicUrls): Record<string, Record<string, unknown>> {
  const root = new URL(urls.siteUrl).pathname.replace(/\/$/, '');
  return {
    [`${root}/.well-known/oauth-authorization-server`]: authorizationServerMetadata(urls),
    [`${root}/.well-known/oauth-protected-resource`]: protectedResourceMetadata(urls),
  };
}
