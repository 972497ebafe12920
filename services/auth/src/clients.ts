import { randomBytes } from 'node:crypto';
import { codePointLength } from '@agentroom/kit/domain';
import { fetchGuarded, OutboundRefusal, type OutboundPolicy } from '@agentroom/kit/http';
import type { Logger } from '@agentroom/kit/log';
import { DomainError } from '@agentroom/kit/problems';
import type { Clock } from '@agentroom/kit/store';
import { OAuthClientInformationFullSchema } from '@modelcontextprotocol/sdk/shared/auth.js';
import type { OAuthClient } from './records.js';
import type { AuthStore } from './store.js';

/** The longest a name, URL or redirect URI of a client may be, and how many redirect URIs it may have. */
export const CLIENT_NAME_MAX = 100;
export const CLIENT_URL_MAX = 2_000;
export const REDIRECT_URIS_MAX = 10;
/** A registration nobody authorizes within a day is forgotten; one in use is kept 90 days past its last use. */
export const UNUSED_CLIENT_TTL_MS = 86_400_000;
export const USED_CLIENT_TTL_MS = 90 * 86_400_000;
/** Client metadata documents: how long a fetch may take, how large the document may be, how long it is kept at most. */
export const DOCUMENT_TIMEOUT_MS = 3_000;
export const DOCUMENT_MAX_BYTES = 5_120;
const DOCUMENT_MAX_AGE_MS = 86_400_000;
/** Kept this long when its answer says nothing about caching. */
const DOCUMENT_DEFAULT_AGE_MS = 300_000;
const DOCUMENT_CACHE_ENTRIES = 1_000;
/** Registrations per client address per hour. */
export const REGISTRATIONS_PER_HOUR = 20;

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/** The metadata a client registers (RFC 7591 §2), as edge parsed it from JSON. */
export interface ClientMetadataInput {
  redirectUris: string[];
  clientName?: string | undefined;
  clientUri?: string | undefined;
  logoUri?: string | undefined;
  grantTypes?: string[] | undefined;
  responseTypes?: string[] | undefined;
  tokenEndpointAuthMethod?: string | undefined;
  scope?: string | undefined;
  softwareId?: string | undefined;
  softwareVersion?: string | undefined;
}

function metadataError(parameter: string, detail: string, expected: string): DomainError {
  return new DomainError('invalid-client-metadata', { detail, fields: { parameter, expected } });
}

function redirectError(detail: string): DomainError {
  return new DomainError('invalid-redirect-uri', {
    detail,
    fields: {
      parameter: 'redirect_uris',
      expected:
        'https URLs, http URLs on a loopback address (127.0.0.1, [::1], localhost), or a private-use scheme such as com.example.app:/callback; no fragment',
    },
  });
}

/**
 * Whether a redirect URI may be registered (RFC 8252, OAuth 2.1 §2.3.1): https anywhere, http only on
 * loopback, or a private-use scheme named after a domain (a dot in it) for native apps. Never a
 * fragment, credentials, or a scheme a browser would run (javascript:, data:, file:).
 */
export function redirectUriFault(uri: string): string | undefined {
  if (codePointLength(uri) > CLIENT_URL_MAX) return `a redirect URI is longer than ${CLIENT_URL_MAX} characters`;
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return `${JSON.stringify(uri.slice(0, 100))} is not an absolute URL`;
  }
  if (url.hash !== '' || uri.includes('#')) return 'a redirect URI may not hold a fragment';
  if (url.username !== '' || url.password !== '') return 'a redirect URI may not hold credentials';
  const scheme = url.protocol.slice(0, -1);
  if (scheme === 'https') return undefined;
  if (scheme === 'http') return LOOPBACK_HOSTS.has(url.hostname) ? undefined : 'http is allowed only on a loopback address; use https';
  return scheme.includes('.')
    ? undefined
    : `the scheme ${scheme}: is neither https, loopback http, nor a private-use scheme named after a domain (com.example.app:)`;
}

/**
 * RFC 8252 §7.3: a loopback redirect matches at any port; everything else matches exactly. The MCP
 * SDK's server has the same rule; ours also lets `localhost` stand only for itself.
 */
export function redirectUriMatches(requested: string, registered: string): boolean {
  if (requested === registered) return true;
  let req: URL;
  let reg: URL;
  try {
    req = new URL(requested);
    reg = new URL(registered);
  } catch {
    return false;
  }
  if (!LOOPBACK_HOSTS.has(req.hostname) || req.hostname !== reg.hostname) return false;
  return req.protocol === reg.protocol && req.pathname === reg.pathname && req.search === reg.search && req.hash === '' && reg.hash === '';
}

/** An optional text field of a registration: trimmed, printable, at most `max` code points. */
function textField(parameter: string, value: string | undefined, max: number): string | undefined {
  if (value === undefined) return undefined;
  const text = value.trim().replace(/\s+/g, ' ');
  if (text === '') return undefined;
  if (codePointLength(text) > max || /\p{Cc}/u.test(text))
    throw metadataError(parameter, `${parameter} must be at most ${max} printable characters.`, `at most ${max} printable characters`);
  return text;
}

function httpsField(parameter: string, value: string | undefined): string | undefined {
  if (value === undefined || value === '') return undefined;
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (!url || url.protocol !== 'https:' || value.length > CLIENT_URL_MAX)
    throw metadataError(parameter, `${parameter} must be an https URL.`, `an https URL of at most ${CLIENT_URL_MAX} characters`);
  return url.href;
}

/** Checks client metadata by our rules and answers the client it describes (without id or kind). */
export function checkClientMetadata(input: ClientMetadataInput): Omit<OAuthClient, 'clientId' | 'kind' | 'createdAt'> {
  if (input.redirectUris.length === 0 || input.redirectUris.length > REDIRECT_URIS_MAX) {
    throw redirectError(`redirect_uris must list 1 to ${REDIRECT_URIS_MAX} URIs.`);
  }
  for (const uri of input.redirectUris) {
    const fault = redirectUriFault(uri);
    if (fault !== undefined) throw redirectError(`${fault.charAt(0).toUpperCase()}${fault.slice(1)}.`);
  }
  const grantTypes = input.grantTypes ?? ['authorization_code', 'refresh_token'];
  const unknownGrant = grantTypes.find((grant) => grant !== 'authorization_code' && grant !== 'refresh_token');
  if (unknownGrant !== undefined || !grantTypes.includes('authorization_code')) {
    throw metadataError('grant_types', `grant_types ${JSON.stringify(grantTypes)} is not served here.`, 'authorization_code, optionally with refresh_token');
  }
  const responseTypes = input.responseTypes ?? ['code'];
  if (responseTypes.length !== 1 || responseTypes[0] !== 'code') throw metadataError('response_types', 'Only the code response type is served.', '["code"]');
  // Public clients only: PKCE proves the client; a secret would sit in every copy of a native app.
  const method = input.tokenEndpointAuthMethod;
  if (method !== undefined && method !== 'none') {
    throw metadataError(
      'token_endpoint_auth_method',
      `token_endpoint_auth_method ${JSON.stringify(method.slice(0, 50))} is not served: clients here are public.`,
      'none',
    );
  }
  const clientName = textField('client_name', input.clientName, CLIENT_NAME_MAX);
  const clientUri = httpsField('client_uri', input.clientUri);
  const logoUri = httpsField('logo_uri', input.logoUri);
  const scope = textField('scope', input.scope, 500);
  const softwareId = textField('software_id', input.softwareId, 200);
  const softwareVersion = textField('software_version', input.softwareVersion, 200);
  return {
    redirectUris: [...input.redirectUris],
    grantTypes: [...new Set(grantTypes)],
    responseTypes: ['code'],
    ...(clientName === undefined ? {} : { clientName }),
    ...(clientUri === undefined ? {} : { clientUri }),
    ...(logoUri === undefined ? {} : { logoUri }),
    ...(scope === undefined ? {} : { scope }),
    ...(softwareId === undefined ? {} : { softwareId }),
    ...(softwareVersion === undefined ? {} : { softwareVersion }),
  };
}

/** Whether a client_id names a Client ID Metadata Document: an https URL with a path (the MCP authorization spec). */
export function isDocumentClientId(clientId: string): boolean {
  if (!clientId.startsWith('https://') && !clientId.startsWith('http://')) return false;
  try {
    const url = new URL(clientId);
    return url.pathname !== '/' && url.pathname !== '';
  } catch {
    return false;
  }
}

/** The max-age a document's Cache-Control allows, in ms: 0 for no-store/no-cache, the default when unsaid. */
function cacheAge(header: string | string[] | undefined): number {
  const value = (Array.isArray(header) ? header.join(',') : (header ?? '')).toLowerCase();
  if (/(?:^|[\s,])(?:no-store|no-cache|private)(?:$|[\s,=])/.test(value)) return 0;
  const maxAge = /(?:^|[\s,])max-age\s*=\s*"?(\d+)/.exec(value)?.[1];
  if (maxAge === undefined) return DOCUMENT_DEFAULT_AGE_MS;
  return Math.min(DOCUMENT_MAX_AGE_MS, Number(maxAge) * 1000);
}

export interface OAuthClientsOptions {
  store: AuthStore;
  clock: Clock;
  log: Logger;
  /** OAUTH_CIMD_ALLOW_LOOPBACK: fetch metadata documents over http on loopback too (tests, local hosts). */
  allowLoopbackDocuments: boolean;
  /** Injected DNS, for tests of the address guard. */
  lookup?: (hostname: string) => Promise<{ address: string; family: 4 | 6 }[]>;
}

/**
 * OAuth clients: those registered here (RFC 7591, public, rate-limited per address, forgotten when
 * unused) and those that describe themselves with a Client ID Metadata Document, an https URL that
 * is their client_id, fetched with the outbound guard and kept as its caching headers allow.
 */
export class OAuthClients {
  private readonly documents = new Map<string, { client: OAuthClient; until: number }>();

  constructor(private readonly options: OAuthClientsOptions) {}

  /** RFC 7591 registration: a public client with a new id; unused for a day, it is forgotten. */
  async register(input: ClientMetadataInput, address: string): Promise<OAuthClient> {
    const window = await this.options.store.countAttempt(`register:${address}`, 3_600_000);
    if (window.count > REGISTRATIONS_PER_HOUR) {
      const seconds = Math.max(1, Math.ceil((window.resetAt - this.options.clock.now()) / 1000));
      throw new DomainError('rate-limited', {
        detail: `This address registered ${REGISTRATIONS_PER_HOUR} clients within the hour.`,
        fields: { retry_after: seconds, limit: REGISTRATIONS_PER_HOUR },
      });
    }
    const client: OAuthClient = {
      clientId: `cl_${randomBytes(18).toString('base64url')}`,
      kind: 'registered',
      ...checkClientMetadata(input),
      createdAt: this.options.clock.now(),
      registeredFrom: address,
    };
    await this.options.store.putRecord('client', client.clientId, client, client.createdAt + UNUSED_CLIENT_TTL_MS);
    this.options.log.info({ clientId: client.clientId, clientName: client.clientName, address }, 'OAuth client registered');
    return client;
  }

  /** Keeps a registered client that is in use for another 90 days. */
  async touch(client: OAuthClient): Promise<void> {
    if (client.kind === 'registered') await this.options.store.putRecord('client', client.clientId, client, this.options.clock.now() + USED_CLIENT_TTL_MS);
  }

  /** The client a client_id names, or invalid-client saying why not. */
  async resolve(clientId: string): Promise<OAuthClient> {
    if (clientId === '') throw new DomainError('invalid-client', { detail: 'client_id is missing.', fields: { parameter: 'client_id' } });
    if (isDocumentClientId(clientId)) return this.document(clientId);
    const client = clientId.length <= 100 ? await this.options.store.record('client', clientId) : undefined;
    if (!client)
      throw new DomainError('invalid-client', {
        detail: 'No client is registered with this client_id (unused registrations are forgotten after a day).',
        fields: { parameter: 'client_id' },
      });
    return client;
  }

  private policy(): OutboundPolicy {
    return this.options.allowLoopbackDocuments ? { allowLoopback: true, allowHttp: true } : {};
  }

  private async document(url: string): Promise<OAuthClient> {
    const now = this.options.clock.now();
    const cached = this.documents.get(url);
    if (cached && cached.until > now) return cached.client;
    if (url.startsWith('http://') && !this.options.allowLoopbackDocuments) {
      throw new DomainError('invalid-client', { detail: 'A client metadata document must be served over https.', fields: { parameter: 'client_id' } });
    }
    let answer;
    try {
      answer = await fetchGuarded(
        url,
        {
          timeoutMs: DOCUMENT_TIMEOUT_MS,
          maxBytes: DOCUMENT_MAX_BYTES,
          headers: { accept: 'application/json' },
          ...(this.options.lookup ? { lookup: this.options.lookup } : {}),
        },
        this.policy(),
      );
    } catch (error) {
      if (error instanceof OutboundRefusal) {
        this.options.log.info({ clientId: url, reason: error.reason }, 'client metadata document refused');
        throw new DomainError('invalid-client', {
          detail: `The client metadata document could not be read: ${error.message}`,
          fields: { parameter: 'client_id' },
        });
      }
      throw error;
    }
    if (answer.status !== 200) {
      throw new DomainError('invalid-client', { detail: `The client metadata document answered HTTP ${answer.status}.`, fields: { parameter: 'client_id' } });
    }
    let json: unknown;
    try {
      json = JSON.parse(answer.body.toString('utf8'));
    } catch {
      throw new DomainError('invalid-client', { detail: 'The client metadata document is not JSON.', fields: { parameter: 'client_id' } });
    }
    const parsed = OAuthClientInformationFullSchema.safeParse(json);
    if (!parsed.success) {
      throw new DomainError('invalid-client', {
        detail: `The client metadata document is not valid client metadata (${parsed.error.issues[0]?.path.join('.') ?? 'body'}).`,
        fields: { parameter: 'client_id' },
      });
    }
    const document = parsed.data;
    if (document.client_id !== url) {
      throw new DomainError('invalid-client', {
        detail: 'The client metadata document names another client_id than its own URL.',
        fields: { parameter: 'client_id' },
      });
    }
    let checked;
    try {
      checked = checkClientMetadata({
        redirectUris: document.redirect_uris,
        clientName: document.client_name,
        clientUri: document.client_uri,
        logoUri: document.logo_uri,
        grantTypes: document.grant_types,
        responseTypes: document.response_types,
        tokenEndpointAuthMethod: document.token_endpoint_auth_method,
        scope: document.scope,
        softwareId: document.software_id,
        softwareVersion: document.software_version,
      });
    } catch (error) {
      if (error instanceof DomainError)
        throw new DomainError('invalid-client', {
          detail: `The client metadata document is refused: ${error.detail ?? error.message}`,
          fields: { parameter: 'client_id' },
        });
      throw error;
    }
    const client: OAuthClient = { clientId: url, kind: 'document', ...checked, createdAt: now };
    const age = cacheAge(answer.headers['cache-control']);
    if (age > 0) {
      if (this.documents.size >= DOCUMENT_CACHE_ENTRIES) this.documents.delete(this.documents.keys().next().value as string);
      this.documents.set(url, { client, until: now + age });
    }
    return client;
  }
}
