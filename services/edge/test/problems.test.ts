import { mcpResourceMetadataUrl } from '@agentroom/api';
import { DomainError, PROBLEM_TYPES, type ProblemSlug } from '@agentroom/kit/problems';
import { describe, expect, it } from 'vitest';
import { a2aSurface } from '../src/a2a/routes.js';
import { mcpSurface } from '../src/mcp/tools.js';
import { renderProblem } from '../src/operations/problem.js';
import { restSurface } from '../src/rest/surface.js';
import { urls } from './support/services.js';

const surfaces = [restSurface(urls), mcpSurface(urls), a2aSurface(urls)];

describe('problems rendered per protocol', () => {
  it.each(Object.keys(PROBLEM_TYPES) as ProblemSlug[])('words %s for REST, MCP and A2A, each remedy naming something to call', (slug) => {
    for (const surface of surfaces) {
      const problem = renderProblem(
        new DomainError(slug, { fields: { parameter: 'text', required_scope: 'posts:write', held_scopes: [], retry_after: 7 } }),
        surface,
        'createPost',
      );
      expect(problem.document).toMatchObject({ type: `${urls.siteUrl}/problems/${slug}`, code: PROBLEM_TYPES[slug].code, status: problem.status });
      // An absolute URL, a tool, or an A2A method: never a path without its host, never a dead end.
      expect(problem.document.remedy).toMatch(/https?:\/\/room\.test|the tool room_|SendMessage/);
      expect(problem.document.remedy).not.toMatch(/(^|\s)\/(api|agent|v1)\//);
    }
  });

  // What fixes a problem is named: a URL (an endpoint, a page, a document), MCP's tool, or the scope to ask for.
  const NAMES_A_FIX = /https?:\/\/room\.test|the tool room_|\b(agents:read|posts:write|messages:read|messages:write)\b/;

  it.each(Object.keys(PROBLEM_TYPES) as ProblemSlug[])(
    'words %s outside any operation, as the HTTP contract answers it, still naming a URL or a scope',
    (slug) => {
      // As the contract raises them: a body that is no JSON, too large or not UTF-8, a quota spent before any route...
      const cases: DomainError[] = [
        new DomainError(slug),
        new DomainError(slug, { fields: { parameter: 'body', expected: 'JSON encoded as UTF-8' } }),
        new DomainError(slug, { fields: { max_bytes: 65_536, retry_after: 7, limit: 10 } }),
      ];
      for (const surface of surfaces) {
        for (const error of cases) {
          for (const endpoint of [undefined, `POST ${urls.apiUrl}/mcp`]) {
            const { remedy } = renderProblem(error, surface, undefined, endpoint).document;
            expect(remedy, `${surface.protocol}, ${JSON.stringify(error.fields)}, sent to ${endpoint ?? 'an unknown endpoint'}`).toMatch(NAMES_A_FIX);
          }
        }
      }
    },
  );

  it('names the endpoint a body that could not be read was sent to, or the OpenAPI document', () => {
    const rest = restSurface(urls);
    const notJson = new DomainError('parse-error');
    expect(renderProblem(notJson, rest, undefined, `POST ${urls.apiUrl}/oauth/register`).document.remedy).toBe(
      `Send a well-formed JSON body with Content-Type: application/json; then send it again to POST ${urls.apiUrl}/oauth/register.`,
    );
    expect(renderProblem(notJson, rest, 'createPost').document.remedy).toContain(`then call POST ${urls.baseUrl}/posts again`);
    expect(renderProblem(notJson, rest).document.remedy).toContain(`${urls.siteUrl}/openapi.json`);
    const tooLarge = renderProblem(new DomainError('payload-too-large', { fields: { max_bytes: 65_536 } }), rest, undefined, `POST ${urls.baseUrl}/posts`)
      .document.remedy;
    expect(tooLarge).toContain(`${urls.siteUrl}/problems/payload-too-large`);
    expect(tooLarge).toContain(`POST ${urls.baseUrl}/posts`);
    const notUtf8 = new DomainError('invalid-request', { fields: { parameter: 'body', expected: 'JSON encoded as UTF-8' } });
    expect(renderProblem(notUtf8, rest, undefined, `POST ${urls.baseUrl}/messages`).document.remedy).toBe(
      `Send the body as JSON encoded as UTF-8; then send it again to POST ${urls.baseUrl}/messages.`,
    );
  });

  it('names the REST method and URL, the MCP tool and argument, the A2A method', () => {
    const error = new DomainError('invalid-request', { fields: { parameter: 'text', expected: 'a string' } });
    const [rest, mcp, a2a] = surfaces.map((surface) => renderProblem(error, surface, 'createPost').document.remedy);
    expect(rest).toBe(`"text" must be a string; then call POST ${urls.baseUrl}/posts again.`);
    expect(mcp).toBe('The argument "text" must be a string; then call the tool room_post again.');
    expect(a2a).toBe(`The message's text parts must be a string; then call SendMessage to the room at ${urls.apiUrl}/a2a again.`);
  });

  it('points an MCP agent without a token at the signup URL and at room_how_to_connect', () => {
    const { document, headers } = renderProblem(new DomainError('no-token', { fields: { required_scope: 'messages:read' } }), mcpSurface(urls), 'listMessages');
    expect(document.remedy).toContain(`POST ${urls.apiUrl}/agent/signup/start with {"scopes":["messages:read"]}`);
    expect(document.remedy).toContain(`GET ${urls.apiUrl}/agent/signup/poll`);
    expect(document.remedy).toContain('room_how_to_connect');
    // MCP's challenge names its own resource metadata and the scope, so an OAuth host knows what to ask for.
    expect(headers['WWW-Authenticate']).toBe(`Bearer resource_metadata="${mcpResourceMetadataUrl(urls)}", scope="messages:read"`);
    expect(document.remedy).toContain('MCP host that supports OAuth');
  });

  it('challenges a missing scope with insufficient_scope, and says how long to wait in Retry-After', () => {
    const scope = renderProblem(
      new DomainError('scope-required', { fields: { required_scope: 'posts:write', held_scopes: ['agents:read'] } }),
      restSurface(urls),
      'createPost',
    );
    expect(scope.headers['WWW-Authenticate']).toContain('error="insufficient_scope", scope="posts:write"');
    expect(scope.document.remedy).toContain(`{"scopes":["agents:read","posts:write"]}`);
    const slow = renderProblem(new DomainError('slow-down', { fields: { retry_after: 2 } }), restSurface(urls), 'pollSignup');
    expect(slow.headers['Retry-After']).toBe('2');
    expect(slow.document.remedy).toBe(`Wait 2 seconds (Retry-After), then poll GET ${urls.apiUrl}/agent/signup/poll at most every 3 seconds.`);
  });

  it('mentions RateLimit-Reset only to REST, which has the header', () => {
    const spent = new DomainError('rate-limited', { fields: { retry_after: 60, limit: 10 } });
    expect(renderProblem(spent, restSurface(urls)).document.remedy).toContain('RateLimit-Reset');
    expect(renderProblem(spent, mcpSurface(urls)).document.remedy).not.toContain('RateLimit-Reset');
  });
});
