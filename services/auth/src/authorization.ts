import { randomBytes } from 'node:crypto';
import type { PublicUrls } from '@agentroom/kit/config';
import { AGENT_CHOICES, hashSecret, HOST_CONNECTIONS_MAX, isWellFormedRefreshToken, mintRefreshToken, type Scope, SCOPES } from '@agentroom/kit/domain';
import type { Logger } from '@agentroom/kit/log';
import { DomainError } from '@agentroom/kit/problems';
import type { Clock } from '@agentroom/kit/store';
import { verifyChallenge } from 'pkce-challenge';
import { agentNameOf } from './device-flow.js';
import { type OAuthClients, redirectUriMatches } from './clients.js';
import type { AuthorizationRequest, Connection, Human, OAuthClient } from './records.js';
import type { RoomGateway } from './room.gateway.js';
import type { AuthStore } from './store.js';
import type { Tokens } from './tokens.js';

/** Access tokens of a connection live an hour by default (OAUTH_ACCESS_TOKEN_TTL_SECONDS). */
export const ACCESS_TOKEN_TTL_SECONDS = 3_600;
/** A code is good for one exchange within a minute; it is remembered ten, so a replay is recognised (docs/decisions.md §21). */
export const CODE_TTL_MS = 60_000;
const CODE_MEMORY_MS = 600_000;
/** The human has ten minutes to answer a consent page. */
export const AUTHORIZATION_REQUEST_TTL_MS = 600_000;
/** RFC 7636 §4.1: a verifier and an S256 challenge are 43 to 128 unreserved characters. */
const PKCE_VALUE = /^[A-Za-z0-9._~-]{43,128}$/;
const DAY_MS = 86_400_000;

/** What the authorization endpoint was sent (RFC 6749 §4.1.1, RFC 7636, RFC 8707), each as a string if present. */
export interface AuthorizeParams {
  response_type?: string | undefined;
  client_id?: string | undefined;
  redirect_uri?: string | undefined;
  code_challenge?: string | undefined;
  code_challenge_method?: string | undefined;
  scope?: string | undefined;
  state?: string | undefined;
  resource?: string | undefined;
}

/**
 * A refusal of the authorization endpoint. With `redirect`, the client and its redirect URI were
 * valid and the error goes back to the client there (RFC 6749 §4.1.2.1); without, it may not be
 * sent anywhere and the human reads it on a page.
 */
export class AuthorizeRefusal extends Error {
  constructor(
    readonly error: DomainError,
    readonly redirect?: string,
  ) {
    super(error.message);
  }
}

/** An agent a form offers: its scopes are the union of those of its tokens the form read. */
export interface AgentChoice {
  agentId: string;
  agentName: string;
  scopes: Scope[];
  /** Made by an operator in the human's name (`npm run agents -- provision`). */
  provisioned: boolean;
}

export interface AgentChoices {
  agents: AgentChoice[];
  /** How many live tokens the human approved one by one: more than AGENT_CHOICES, and the oldest are not offered. */
  approvedTotal: number;
  /** How many live provisioned tokens the human has in all. */
  provisionedTotal: number;
}

/** What the consent page shows. */
export interface ConsentView {
  requestId: string;
  client: { id: string; name: string; kind: OAuthClient['kind']; domain?: string; uri?: string };
  redirectHost: string;
  scopes: Scope[];
  /** The human's agents, to connect the host as one of them (`Authorizations.agentChoices`). */
  agents: AgentChoice[];
  /** How many live tokens the human approved one by one; the agents of the newest AGENT_CHOICES are among `agents`. */
  approvedTotal: number;
  /** How many live provisioned agents the human has; the newest AGENT_CHOICES of them are among `agents`. */
  provisionedTotal: number;
  /** The agent this host connected as before, if any: the page proposes it. */
  previousAgentId?: string;
  /** The agent name the page proposes for a new agent. */
  suggestedName: string;
  expiresAt: number;
}

/** The human's answer on the consent page. */
export interface ConsentChoice {
  /** `new`, or the id of one of the human's agents. */
  agent: string;
  /** For a new agent: its name (defaults to the host's name). */
  agentName: string;
}

/** What the token endpoint answers for a code or a refresh. */
export interface IssuedTokens {
  accessToken: string;
  expiresIn: number;
  refreshToken: string;
  scopes: Scope[];
  agentId: string;
}

export interface AuthorizationsOptions {
  store: AuthStore;
  tokens: Tokens;
  clients: OAuthClients;
  room: RoomGateway;
  clock: Clock;
  log: Logger;
  urls: PublicUrls;
  /** OAUTH_ACCESS_TOKEN_TTL_SECONDS. */
  accessTokenTtlSeconds: number;
  /** TOKEN_TTL_DAYS: how long a connection lasts without being used. */
  connectionTtlDays: number;
}

/** Where a connection's revocation is marked, apart from the connection record that refreshes rewrite. */
function endedKey(connectionId: string): string {
  return `ended:${connectionId}`;
}

function invalidGrant(detail: string): DomainError {
  return new DomainError('invalid-grant', { detail });
}

/**
 * The authorization code flow for MCP hosts (OAuth 2.1 with PKCE S256, RFC 8707 resources, RFC 9207
 * `iss`): the authorization endpoint checks a request and keeps it while the human answers; approval
 * makes a connection (a new agent or one of the human's) and a single-use code; the token endpoint
 * exchanges the code for a short-lived access token and a refresh token that rotates on every use.
 * A code or refresh token used twice ends its connection (OAuth 2.1 §4.3.1, the security BCP).
 */
export class Authorizations {
  private readonly o: AuthorizationsOptions;
  /** The resources tokens may be bound to: the MCP endpoint and the whole API. */
  readonly resources: readonly string[];

  constructor(options: AuthorizationsOptions) {
    this.o = options;
    this.resources = [`${options.urls.apiUrl}/mcp`, options.urls.apiUrl];
  }

  private now(): number {
    return this.o.clock.now();
  }

  /** A resource as a client sent it, matched to ours (a trailing slash aside); undefined when foreign. */
  private ourResource(resource: string): string | undefined {
    const trimmed = resource.replace(/\/+$/, '');
    return this.resources.find((ours) => ours === trimmed);
  }

  /** Where the authorization response goes: the redirect URI with `params`, `state` and `iss` (RFC 9207). */
  private redirectTo(redirectUri: string, params: Record<string, string>, state: string | undefined): string {
    const url = new URL(redirectUri);
    for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value);
    if (state !== undefined) url.searchParams.set('state', state);
    url.searchParams.set('iss', this.o.urls.siteUrl);
    return url.href;
  }

  /** An OAuth error sent back to the client's redirect URI. */
  private refuseTo(
    redirectUri: string,
    state: string | undefined,
    error: string,
    description: string,
    slug: DomainError['slug'] = 'invalid-request',
  ): AuthorizeRefusal {
    return new AuthorizeRefusal(new DomainError(slug, { detail: description }), this.redirectTo(redirectUri, { error, error_description: description }, state));
  }

  /**
   * Checks an authorization request and keeps it for the human's answer; answers its id. A client or
   * redirect URI that does not hold is refused on a page, never by a redirect; anything else wrong
   * goes back to the client's redirect URI.
   */
  async begin(params: AuthorizeParams): Promise<string> {
    let client: OAuthClient;
    try {
      client = await this.o.clients.resolve(params.client_id ?? '');
    } catch (error) {
      if (error instanceof DomainError) throw new AuthorizeRefusal(error);
      throw error;
    }
    let redirectUri = params.redirect_uri;
    const redirectUriOmitted = redirectUri === undefined || redirectUri === '';
    if (redirectUri === undefined || redirectUri === '') {
      if (client.redirectUris.length !== 1) {
        throw new AuthorizeRefusal(
          new DomainError('invalid-redirect-uri', {
            detail: 'redirect_uri is missing, and the client registered more than one.',
            fields: { parameter: 'redirect_uri' },
          }),
        );
      }
      redirectUri = client.redirectUris[0] as string;
    } else if (!client.redirectUris.some((registered) => redirectUriMatches(redirectUri as string, registered))) {
      throw new AuthorizeRefusal(
        new DomainError('invalid-redirect-uri', { detail: 'redirect_uri is not one the client registered.', fields: { parameter: 'redirect_uri' } }),
      );
    }
    const { state } = params;
    if (params.response_type !== 'code') throw this.refuseTo(redirectUri, state, 'unsupported_response_type', 'Only response_type=code is served.');
    if (params.code_challenge === undefined || params.code_challenge === '')
      throw this.refuseTo(redirectUri, state, 'invalid_request', 'PKCE is required: send code_challenge with code_challenge_method=S256.');
    if (params.code_challenge_method !== 'S256')
      throw this.refuseTo(redirectUri, state, 'invalid_request', 'code_challenge_method must be S256; plain is not accepted.');
    if (!PKCE_VALUE.test(params.code_challenge))
      throw this.refuseTo(redirectUri, state, 'invalid_request', 'code_challenge must be the base64url S256 hash of the verifier (43 characters).');
    const asked = (params.scope ?? client.scope ?? SCOPES.join(' ')).split(' ').filter(Boolean);
    const unknown = asked.filter((scope) => !(SCOPES as readonly string[]).includes(scope));
    if (asked.length === 0 || unknown.length > 0) {
      throw this.refuseTo(
        redirectUri,
        state,
        'invalid_scope',
        `Unknown scopes: ${unknown.map((s) => JSON.stringify(s.slice(0, 50))).join(', ') || 'none asked'}; the scopes are ${SCOPES.join(', ')}.`,
        'invalid-scope',
      );
    }
    let resource: string | undefined;
    if (params.resource !== undefined && params.resource !== '') {
      resource = this.ourResource(params.resource);
      if (resource === undefined)
        throw this.refuseTo(redirectUri, state, 'invalid_target', `resource must be ${this.resources.join(' or ')}.`, 'invalid-target');
    }
    const request: AuthorizationRequest = {
      id: randomBytes(24).toString('base64url'),
      clientId: client.clientId,
      redirectUri,
      ...(redirectUriOmitted ? { redirectUriOmitted: true as const } : {}),
      ...(state === undefined ? {} : { state }),
      codeChallenge: params.code_challenge,
      scopes: SCOPES.filter((scope) => asked.includes(scope)),
      ...(resource === undefined ? {} : { resource }),
      createdAt: this.now(),
      expiresAt: this.now() + AUTHORIZATION_REQUEST_TTL_MS,
    };
    await this.o.store.putRecord('authorization', request.id, request, request.expiresAt);
    return request.id;
  }

  private async pending(requestId: string): Promise<AuthorizationRequest> {
    const request = requestId === '' ? undefined : await this.o.store.record('authorization', requestId);
    if (!request || request.expiresAt <= this.now())
      throw new DomainError('authorization-expired', { detail: 'This consent page expired or was already answered.' });
    return request;
  }

  /**
   * The agents a form offers a human to act as (the room's compose form, a host's consent): those of
   * their newest AGENT_CHOICES approved tokens and of their live connections, then those of their
   * newest AGENT_CHOICES provisioned tokens, marked; each once, with the union of the scopes seen.
   * Bounded, so an operator's ten thousand provisioned agents make neither page long nor slow; an
   * agent beyond them is still chosen by id (`approve`, the room's form takes any it offered).
   * `live`: the human's live connections, when the caller has read them already.
   */
  async agentChoices(humanId: string, live?: Connection[]): Promise<AgentChoices> {
    const [approved, provisioned, connections] = await Promise.all([
      this.o.tokens.pageOfHuman(humanId, 'approved', AGENT_CHOICES),
      this.o.tokens.pageOfHuman(humanId, 'provisioned', AGENT_CHOICES),
      live ?? this.connectionsOf(humanId),
    ]);
    const agents = new Map<string, { agentId: string; agentName: string; scopes: Set<Scope>; provisioned: boolean }>();
    const add = (agentId: string, agentName: string, scopes: readonly Scope[], provisioned: boolean): void => {
      const agent = agents.get(agentId) ?? { agentId, agentName, scopes: new Set<Scope>(), provisioned };
      for (const scope of scopes) agent.scopes.add(scope);
      agents.set(agentId, agent);
    };
    for (const token of approved.tokens) add(token.agentId, token.agentName, token.scopes, false);
    for (const connection of connections) add(connection.agentId, connection.agentName, connection.scopes, false);
    for (const token of provisioned.tokens) add(token.agentId, token.agentName, token.scopes, true);
    return {
      agents: [...agents.values()].map((agent) => ({
        agentId: agent.agentId,
        agentName: agent.agentName,
        scopes: SCOPES.filter((scope) => agent.scopes.has(scope)),
        provisioned: agent.provisioned,
      })),
      approvedTotal: approved.total,
      provisionedTotal: provisioned.total,
    };
  }

  /** What the consent page shows a signed-in human. */
  async describe(requestId: string, human: Human): Promise<ConsentView> {
    const request = await this.pending(requestId);
    const client = await this.o.clients.resolve(request.clientId);
    const connections = await this.connectionsOf(human.id);
    const { agents, approvedTotal, provisionedTotal } = await this.agentChoices(human.id, connections);
    const previous = connections.find((c) => c.clientId === client.clientId && agents.some((a) => a.agentId === c.agentId));
    const domain = client.kind === 'document' ? new URL(client.clientId).hostname : undefined;
    const name = client.clientName ?? domain ?? 'An MCP host';
    return {
      requestId,
      client: {
        id: client.clientId,
        name,
        kind: client.kind,
        ...(domain === undefined ? {} : { domain }),
        ...(client.clientUri === undefined ? {} : { uri: client.clientUri }),
      },
      redirectHost: new URL(request.redirectUri).host || new URL(request.redirectUri).protocol,
      scopes: request.scopes,
      agents,
      approvedTotal,
      provisionedTotal,
      ...(previous ? { previousAgentId: previous.agentId } : {}),
      suggestedName: agentNameOf(name, ''),
      expiresAt: request.expiresAt,
    };
  }

  /** The redirect URI of a request, for a page that must allow the browser to go there (CSP form-action). */
  async redirectUriOf(requestId: string): Promise<string | undefined> {
    return (await this.o.store.record('authorization', requestId))?.redirectUri;
  }

  /** Takes the request for an answer: of two answers (a double click, two tabs) one wins. */
  private async take(requestId: string): Promise<AuthorizationRequest> {
    const used = requestId === '' ? undefined : await this.o.store.useRecord('authorization', requestId, this.now());
    if (!used?.first || used.record.expiresAt <= this.now())
      throw new DomainError('authorization-expired', { detail: 'This consent page expired or was already answered.' });
    return used.record;
  }

  /**
   * The human approves: the host becomes a connection of a new agent or of one of theirs (the same
   * identity, a new grant with frozen scopes), and the client gets a single-use code at its redirect URI.
   * Earlier connections of the host stay (another installation of it holds them): the exchange of the
   * code ends the oldest past HOST_CONNECTIONS_MAX (docs/decisions.md §22).
   */
  async approve(requestId: string, human: Human, choice: ConsentChoice): Promise<string> {
    const request = await this.take(requestId);
    const client = await this.o.clients.resolve(request.clientId);
    let agentId: string;
    let agentName: string;
    if (choice.agent === 'new') {
      agentName = agentNameOf(choice.agentName, client.clientName ?? new URL(request.redirectUri).host);
      agentId = await this.o.room.upsertAgent({ id: '', agentName, humanLabel: human.name, humanId: human.id, scopes: request.scopes });
    } else {
      const [token] = await this.o.tokens.liveOfHumanAgent(human.id, choice.agent);
      if (!token) throw new DomainError('not-found', { detail: 'You have no agent with this id that holds a live token.', fields: { parameter: 'agent' } });
      agentId = token.agentId;
      agentName = token.agentName;
    }
    const now = this.now();
    const connection: Connection = {
      id: `con_${randomBytes(12).toString('base64url')}`,
      clientId: client.clientId,
      clientName: client.clientName ?? (client.kind === 'document' ? new URL(client.clientId).hostname : 'An MCP host'),
      clientKind: client.kind,
      humanId: human.id,
      humanLabel: human.name,
      agentId,
      agentName,
      scopes: request.scopes,
      ...(request.resource === undefined ? {} : { resource: request.resource }),
      createdAt: now,
      lastUsedAt: now,
      expiresAt: now + this.o.connectionTtlDays * DAY_MS,
    };
    await this.o.store.putRecord('connection', connection.id, connection, connection.expiresAt + DAY_MS, human.id);
    const code = randomBytes(32).toString('base64url');
    await this.o.store.putRecord(
      'code',
      hashSecret(code),
      {
        hash: hashSecret(code),
        clientId: client.clientId,
        redirectUri: request.redirectUri,
        ...(request.redirectUriOmitted ? { redirectUriOmitted: true as const } : {}),
        codeChallenge: request.codeChallenge,
        connectionId: connection.id,
        expiresAt: now + CODE_TTL_MS,
      },
      now + CODE_MEMORY_MS,
    );
    await this.o.clients.touch(client);
    this.o.log.info(
      { connectionId: connection.id, clientId: client.clientId, agentId, humanId: human.id, scopes: request.scopes },
      'MCP host connection approved',
    );
    return this.redirectTo(request.redirectUri, { code }, request.state);
  }

  /** The human declines: the client hears access_denied at its redirect URI. */
  async decline(requestId: string, human: Human): Promise<string> {
    const request = await this.take(requestId);
    this.o.log.info({ clientId: request.clientId, humanId: human.id }, 'MCP host connection declined');
    return this.redirectTo(request.redirectUri, { error: 'access_denied', error_description: 'The human declined the connection.' }, request.state);
  }

  /**
   * RFC 6749 §4.1.3 with PKCE: a code, once, for the client and redirect URI it was issued to. Every
   * check runs before the code is spent, so a refused request leaves it good for a corrected one
   * within its minute; only a request that passes the client, redirect URI and verifier checks with a
   * spent code is a replay, and ends the connection (docs/decisions.md §21).
   */
  async exchangeCode(input: { code: string; codeVerifier: string; redirectUri: string; clientId: string; resource: string }): Promise<IssuedTokens> {
    if (input.code === '') throw invalidGrant('code is missing.');
    if (input.clientId === '')
      throw new DomainError('invalid-client', {
        detail: 'client_id is missing: public clients name themselves in the token request.',
        fields: { parameter: 'client_id' },
      });
    const hash = hashSecret(input.code);
    const record = await this.o.store.record('code', hash);
    if (!record) throw invalidGrant('The code is unknown or expired.');
    if (record.clientId !== input.clientId) throw invalidGrant('The code was issued to another client.');
    if (input.redirectUri === '') {
      if (record.redirectUriOmitted !== true) {
        throw new DomainError('invalid-request', {
          detail: 'redirect_uri is missing: the authorization request named one, so the token request must name the same (RFC 6749 §4.1.3).',
          fields: { parameter: 'redirect_uri', expected: 'the redirect_uri of the authorization request, exactly' },
        });
      }
    } else if (input.redirectUri !== record.redirectUri) {
      throw invalidGrant('redirect_uri differs from the one of the authorization request.');
    }
    if (!PKCE_VALUE.test(input.codeVerifier) || !(await verifyChallenge(input.codeVerifier, record.codeChallenge))) {
      throw invalidGrant('code_verifier does not match the code_challenge of the authorization request.');
    }
    if (record.usedAt !== undefined) return this.replayed(record.connectionId);
    if (record.expiresAt <= this.now()) throw invalidGrant('The code expired: codes are good for 60 seconds.');
    const connection = await this.liveConnection(record.connectionId);
    const resource = this.boundResource(connection, input.resource);
    const used = await this.o.store.useRecord('code', hash, this.now());
    if (!used) throw invalidGrant('The code is unknown or expired.');
    // Two exchanges at once that both passed the checks: the one that lost is a replay too.
    if (!used.first) return this.replayed(record.connectionId);
    const issued = await this.issue(connection, resource);
    try {
      await this.keepNewest(connection);
    } catch (error) {
      // The host has its tokens either way: the next exchange of this host and agent trims again.
      this.o.log.warn({ err: error, connectionId: connection.id }, 'the oldest connections of a host past HOST_CONNECTIONS_MAX were not revoked');
    }
    return issued;
  }

  /** RFC 6749 §4.1.2: a code exchanged twice was stolen or replayed; what it granted is withdrawn. */
  private async replayed(connectionId: string): Promise<never> {
    await this.revokeConnectionById(connectionId, 'auth');
    throw invalidGrant('The code was used already; the connection it made is revoked. Connect again.');
  }

  /**
   * Ends the oldest approved connections of a host (one client_id) as one agent past
   * HOST_CONNECTIONS_MAX, keeping the one just exchanged (docs/decisions.md §22).
   */
  private async keepNewest(kept: Connection): Promise<void> {
    const others = (await this.connectionsOf(kept.humanId))
      .filter((c) => c.clientId === kept.clientId && c.agentId === kept.agentId && c.id !== kept.id)
      .sort((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? 1 : -1));
    for (const old of others.slice(HOST_CONNECTIONS_MAX - 1)) {
      this.o.log.info(
        { connectionId: old.id, clientId: old.clientId, agentId: old.agentId, limit: HOST_CONNECTIONS_MAX },
        'the oldest connection of a host as this agent makes way for a new one',
      );
      await this.endConnection(old, 'auth');
    }
  }

  /**
   * RFC 6749 §6 with rotation: each refresh token works once; one used again ends the connection. A
   * request refused for its client or resource is checked before the token is spent, so a client's
   * honest mistake is not taken for a replay.
   */
  async refresh(input: { refreshToken: string; clientId: string; resource: string }): Promise<IssuedTokens> {
    if (!isWellFormedRefreshToken(input.refreshToken)) throw invalidGrant('The refresh token is malformed or its checksum does not match.');
    if (input.clientId === '')
      throw new DomainError('invalid-client', {
        detail: 'client_id is missing: public clients name themselves in the token request.',
        fields: { parameter: 'client_id' },
      });
    const hash = hashSecret(input.refreshToken);
    const found = await this.o.store.record('refresh', hash);
    if (!found) throw invalidGrant('The refresh token is unknown or expired.');
    if (found.clientId !== input.clientId) throw invalidGrant('The refresh token was issued to another client.');
    const connection = await this.liveConnection(found.connectionId);
    const resource = this.boundResource(connection, input.resource);
    const used = await this.o.store.useRecord('refresh', hash, this.now());
    if (!used) throw invalidGrant('The refresh token is unknown or expired.');
    if (!used.first) {
      await this.revokeConnectionById(found.connectionId, 'auth');
      throw invalidGrant('This refresh token was used already, so it may have leaked: its connection is revoked. Connect again.');
    }
    return this.issue(await this.liveConnection(found.connectionId), resource);
  }

  private async liveConnection(id: string): Promise<Connection> {
    const [connection, ended] = await Promise.all([this.o.store.record('connection', id), this.o.store.record('connection', endedKey(id))]);
    if (!connection || ended || connection.revokedAt !== undefined || connection.expiresAt <= this.now())
      throw invalidGrant('The connection was revoked or has expired. Connect again.');
    return connection;
  }

  /** The resource a token of the connection is bound to: the one the authorization request named, unless the token request names one. */
  private boundResource(connection: Connection, asked: string): string | undefined {
    if (asked === '') return connection.resource;
    const ours = this.ourResource(asked);
    if (ours === undefined || (connection.resource !== undefined && ours !== connection.resource)) {
      throw new DomainError('invalid-target', {
        detail: `resource must be ${connection.resource ?? this.resources.join(' or ')}, as the authorization request named it.`,
        fields: { parameter: 'resource' },
      });
    }
    return ours;
  }

  /** A new access token and the next refresh token of a connection. */
  private async issue(connection: Connection, resource: string | undefined): Promise<IssuedTokens> {
    const { token, record } = await this.o.tokens.mint({
      agentId: connection.agentId,
      agentName: connection.agentName,
      humanId: connection.humanId,
      humanLabel: connection.humanLabel,
      scopes: connection.scopes,
      connectionId: connection.id,
      ttlMs: this.o.accessTokenTtlSeconds * 1000,
      ...(resource === undefined ? {} : { resource }),
    });
    const refreshToken = mintRefreshToken();
    const now = this.now();
    const hash = hashSecret(refreshToken);
    // A connection in use lasts TOKEN_TTL_DAYS from its last refresh: its record is kept that long again.
    const expiresAt = Math.max(connection.expiresAt, now + this.o.connectionTtlDays * DAY_MS);
    await this.o.store.putRecord('refresh', hash, { hash, connectionId: connection.id, clientId: connection.clientId, expiresAt }, expiresAt);
    await this.o.store.putRecord(
      'connection',
      connection.id,
      { ...connection, refreshHash: hash, lastUsedAt: now, expiresAt },
      expiresAt + DAY_MS,
      connection.humanId,
    );
    // A revocation that ran meanwhile wrote its marker before sweeping the tokens: either its sweep saw
    // the token minted here, or this check sees the marker and withdraws the token.
    if (await this.o.store.record('connection', endedKey(connection.id))) {
      await this.o.tokens.withdraw(record);
      throw invalidGrant('The connection was revoked. Connect again.');
    }
    try {
      await this.o.tokens.syncAgent({ agentId: connection.agentId, agentName: connection.agentName, humanLabel: connection.humanLabel });
    } catch (error) {
      this.o.log.warn({ err: error, agentId: connection.agentId }, 'room did not take the agent scopes after a token was issued');
    }
    return {
      accessToken: token,
      expiresIn: Math.round((record.expiresAt - record.createdAt) / 1000),
      refreshToken,
      scopes: record.scopes,
      agentId: connection.agentId,
    };
  }

  /** The connections a human made that still work, newest first (those not yet exchanged are left out). */
  async connectionsOf(humanId: string): Promise<Connection[]> {
    const now = this.now();
    const listed = (await this.o.store.recordsOf('connection', humanId)).filter(
      (c) => c.revokedAt === undefined && c.expiresAt > now && c.refreshHash !== undefined,
    );
    const ended = await Promise.all(listed.map((c) => this.o.store.record('connection', endedKey(c.id))));
    return listed.filter((_, i) => ended[i] === undefined);
  }

  /** The human revokes a connection on /account: its access and refresh tokens stop working. */
  async revokeForHuman(humanId: string, connectionId: string): Promise<Connection> {
    const connection = connectionId === '' ? undefined : await this.o.store.record('connection', connectionId);
    if (!connection || connection.humanId !== humanId || connection.revokedAt !== undefined) {
      throw new DomainError('not-found', { detail: 'You have no live connection with this id.', fields: { parameter: 'connection_id' } });
    }
    return this.endConnection(connection, 'human');
  }

  /** RFC 7009 for a refresh token: the connection it belongs to ends, access tokens included. */
  async revokeRefreshToken(refreshToken: string): Promise<void> {
    if (!isWellFormedRefreshToken(refreshToken)) return;
    const record = await this.o.store.record('refresh', hashSecret(refreshToken));
    if (record) await this.revokeConnectionById(record.connectionId, 'agent');
  }

  private async revokeConnectionById(id: string, by: 'agent' | 'human' | 'auth'): Promise<void> {
    const connection = await this.o.store.record('connection', id);
    if (connection && connection.revokedAt === undefined) await this.endConnection(connection, by);
  }

  private async endConnection(connection: Connection, by: 'agent' | 'human' | 'auth'): Promise<Connection> {
    const ended = { ...connection, revokedAt: this.now() };
    // The marker first, under a key no refresh writes: a refresh racing this sees it (see issue()).
    await this.o.store.putRecord('connection', endedKey(connection.id), ended, connection.expiresAt + DAY_MS);
    await this.o.store.updateRecord('connection', connection.id, ended);
    await this.o.tokens.revokeConnectionTokens(connection.agentId, connection.id, by);
    this.o.log.info({ connectionId: connection.id, agentId: connection.agentId, by }, 'MCP host connection revoked');
    return ended;
  }
}
