import { DomainError, isWellFormedToken, type PublicUrls, type QuotaSubject, type Scope } from '@agentroom/kit';
import type { Request, RequestHandler, Response } from 'express';
import type { AuthGateway, Principal } from './gateways/auth.gateway.js';

/** `WWW-Authenticate` of every 401 and 403 (CONTRACT §2), pointing at the protected-resource metadata. */
export function bearerChallenge(urls: PublicUrls, insufficientScope?: Scope): string {
  const base = `Bearer resource_metadata="${urls.siteUrl}/.well-known/oauth-protected-resource"`;
  return insufficientScope ? `${base}, error="insufficient_scope", scope="${insufficientScope}"` : base;
}

const BEARER = /^Bearer ([^\s]+)$/i;

/** The bearer token of a request, undefined without an Authorization header; a malformed header is 401. */
export function bearerToken(req: Request, urls: PublicUrls): string | undefined {
  const header = req.headers.authorization;
  if (header === undefined) return undefined;
  const token = BEARER.exec(header)?.[1];
  // A mistyped token fails its checksum here, before any store is asked.
  if (token === undefined || !isWellFormedToken(token)) throw tokenInvalid(urls, 'The Authorization header does not hold a well-formed agt_ bearer token.');
  return token;
}

function tokenInvalid(urls: PublicUrls, detail: string): DomainError {
  return new DomainError('token-invalid', {
    detail,
    remedy: `Send Authorization: Bearer <token> with a token from the signup flow (POST ${urls.apiUrl}/agent/signup/start); a revoked token must be replaced the same way.`,
    headers: { 'WWW-Authenticate': bearerChallenge(urls) },
  });
}

/** The principal of an authenticated request, set by `identifyBearer`. */
export function principalOf(res: Response): Principal | undefined {
  return res.locals.principal as Principal | undefined;
}

/**
 * The kit's `identify` step for edge: no token counts per address; a valid token counts against
 * its own quota and is remembered for the route; a bad one is 401 with the challenge.
 */
export function identifyBearer(auth: AuthGateway, urls: PublicUrls, quotaPerToken: number) {
  return async (req: Request, res: Response): Promise<QuotaSubject | undefined> => {
    const token = bearerToken(req, urls);
    if (token === undefined) return undefined;
    let principal: Principal;
    try {
      principal = await auth.authenticate(token);
    } catch (error) {
      if (error instanceof DomainError && (error.slug === 'token-invalid' || error.slug === 'token-expired')) {
        throw new DomainError(error.slug, {
          ...(error.detail === undefined ? {} : { detail: error.detail }),
          remedy: error.remedy,
          headers: { ...error.headers, 'WWW-Authenticate': bearerChallenge(urls) },
        });
      }
      throw error;
    }
    res.locals.principal = principal;
    res.locals.bearerToken = token;
    return { subject: `tok:${principal.tokenId}`, limit: quotaPerToken };
  };
}

/**
 * Guards a route with one scope: no token is 401 `no_token`; a token without the scope is 403 with
 * `required_scope`, `held_scopes` and the exact signup call that gets a token holding it.
 */
export function requireScope(scope: Scope, urls: PublicUrls): RequestHandler {
  return (_req, res, next) => {
    const principal = principalOf(res);
    if (!principal) {
      return next(
        new DomainError('no-token', {
          detail: `This operation needs a bearer token with the scope ${scope}.`,
          remedy: `Get a token: POST ${urls.apiUrl}/agent/signup/start with {"scopes":["${scope}"]}, show the human the verification_uri_complete, poll ${urls.apiUrl}/agent/signup/poll, then send Authorization: Bearer <token>.`,
          extensions: { required_scope: scope },
          headers: { 'WWW-Authenticate': bearerChallenge(urls) },
        }),
      );
    }
    if (principal.scopes.includes(scope)) return next();
    const wanted = [...principal.scopes, scope];
    return next(
      new DomainError('scope-required', {
        detail: `The token holds ${principal.scopes.join(', ') || 'no scopes'}; this operation needs ${scope}.`,
        remedy: `Scopes are frozen. POST ${urls.apiUrl}/agent/signup/start with {"scopes":${JSON.stringify(wanted)}} and this token as Authorization: Bearer, so the same agent gets a new token once its human approves.`,
        extensions: { required_scope: scope, held_scopes: principal.scopes },
        headers: { 'WWW-Authenticate': bearerChallenge(urls, scope) },
      }),
    );
  };
}
