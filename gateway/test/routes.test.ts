import { describe, expect, it } from 'vitest';
import { matchRoute, resolveRoutes, ROUTES } from '../src/routes.js';

describe('the route table', () => {
  it('covers every edge path of docs/decisions.md §1', () => {
    const paths = ROUTES.map((r) => `${r.base}:${r.path}`);
    for (const path of [
      'site:/',
      'site:/developers',
      'site:/assets/',
      'site:/device',
      'site:/authorize',
      'site:/signin',
      'site:/signout',
      'site:/account',
      'api:/agent/signup/complete',
      'api:/agent/signup/start',
      'api:/agent/signup/poll',
      'api:/agent/feedback',
      'api:/mcp',
      'api:/a2a/',
      'api:/oauth/',
      'base:/',
    ]) {
      expect(paths).toContain(path);
    }
  });

  it('places routes on one origin by path', () => {
    const routes = resolveRoutes({ siteUrl: 'http://localhost:8080', apiUrl: 'http://localhost:8080/api', baseUrl: 'http://localhost:8080/api/v1' });
    expect(matchRoute(routes, 'localhost:8080', '/')?.path).toBe('/');
    expect(matchRoute(routes, 'anything', '/api/v1/posts')?.path).toBe('/api/v1/');
    expect(matchRoute(routes, undefined, '/api/agent/signup/start')?.path).toBe('/api/agent/signup/start');
    expect(matchRoute(routes, undefined, '/api/agent/signup/complete')?.upstream).toBe('auth');
    expect(matchRoute(routes, undefined, '/device')?.upstream).toBe('auth');
    expect(matchRoute(routes, undefined, '/assets/room.js')?.upstream).toBe('edge');
    expect(matchRoute(routes, undefined, '/.well-known/oauth-protected-resource')?.upstream).toBe('gateway');
    // RFC 9728 §3.1: the MCP resource's metadata, the well-known segment before the path of {api_url}/mcp.
    expect(matchRoute(routes, undefined, '/.well-known/oauth-protected-resource/api/mcp')?.upstream).toBe('gateway');
    expect(matchRoute(routes, undefined, '/authorize')).toMatchObject({ upstream: 'auth', match: 'exact' });
    expect(matchRoute(routes, undefined, '/authorize/x')).toBeUndefined();
    // A site without a path: RFC 8414's two locations are one route, placed once.
    expect(routes.filter((route) => route.path === '/.well-known/oauth-authorization-server')).toHaveLength(1);
    // RFC 9728 §3.1: the API's own metadata, the well-known segment before the path of {api_url}.
    expect(matchRoute(routes, undefined, '/.well-known/oauth-protected-resource/api')?.upstream).toBe('gateway');
    // On one host, the site-host copies of the API's and MCP's metadata are not placed.
    expect(routes.filter((route) => route.path.includes('oauth-protected-resource')).map((route) => route.path)).toEqual([
      '/.well-known/oauth-protected-resource',
      '/.well-known/oauth-protected-resource/api',
      '/.well-known/oauth-protected-resource/api/mcp',
    ]);
    expect(matchRoute(routes, undefined, '/api/a2a/a_123')?.streaming).toBe(true);
    // Exact routes do not swallow their neighbours; unknown paths go to the catch-all.
    expect(matchRoute(routes, undefined, '/api/agent/signup/startx')).toBeUndefined();
    expect(matchRoute(routes, undefined, '/index.html')).toBeUndefined();
  });

  it('places routes on two hosts by host, when site and API live apart', () => {
    const routes = resolveRoutes({ siteUrl: 'https://room.example', apiUrl: 'https://api.room.example', baseUrl: 'https://api.room.example/v1' });
    expect(matchRoute(routes, 'api.room.example', '/v1/posts')).toMatchObject({ host: 'api.room.example', path: '/v1/', upstream: 'edge' });
    expect(matchRoute(routes, 'room.example', '/v1/posts')).toBeUndefined();
    expect(matchRoute(routes, 'room.example', '/')).toMatchObject({ host: 'room.example', path: '/' });
    expect(matchRoute(routes, 'api.room.example', '/mcp')?.path).toBe('/mcp');
    // The MCP resource's metadata on the API's host (where RFC 9728 puts it) and on the site's.
    expect(matchRoute(routes, 'api.room.example', '/.well-known/oauth-protected-resource/mcp')).toMatchObject({
      host: 'api.room.example',
      upstream: 'gateway',
    });
    expect(matchRoute(routes, 'room.example', '/.well-known/oauth-protected-resource/mcp')).toMatchObject({ host: 'room.example', upstream: 'gateway' });
    // The API at its host's root: its metadata is that host's root document (RFC 9728 §3.1).
    expect(matchRoute(routes, 'api.room.example', '/.well-known/oauth-protected-resource')).toMatchObject({ host: 'api.room.example', upstream: 'gateway' });
    expect(matchRoute(routes, 'room.example', '/authorize')).toMatchObject({ host: 'room.example', upstream: 'auth' });
    expect(matchRoute(routes, 'api.room.example', '/authorize')).toBeUndefined();
  });

  it('places routes under a path prefix when the site lives below one', () => {
    const routes = resolveRoutes({ siteUrl: 'https://example.org/room', apiUrl: 'https://example.org/room/api', baseUrl: 'https://example.org/room/api/v1' });
    expect(matchRoute(routes, undefined, '/room')?.path).toBe('/room');
    expect(matchRoute(routes, undefined, '/room/api/v1/agents')?.path).toBe('/room/api/v1/');
    expect(matchRoute(routes, undefined, '/room/authorize')?.upstream).toBe('auth');
    // RFC 8414 §3.1 and RFC 9728 §3.1 insert the well-known segment at the host's root, before the path.
    expect(matchRoute(routes, undefined, '/.well-known/oauth-authorization-server/room')?.upstream).toBe('gateway');
    expect(matchRoute(routes, undefined, '/room/.well-known/oauth-authorization-server')?.upstream).toBe('gateway');
    expect(matchRoute(routes, undefined, '/.well-known/oauth-protected-resource/room/api/mcp')?.upstream).toBe('gateway');
    expect(matchRoute(routes, undefined, '/.well-known/oauth-authorization-server')).toBeUndefined();
  });

  it("places the root metadata of a site with a path on its host, and the API's on the API's host, when they live apart", () => {
    const routes = resolveRoutes({ siteUrl: 'https://example.org/room', apiUrl: 'https://api.example.org/v2', baseUrl: 'https://api.example.org/v2/v1' });
    expect(matchRoute(routes, 'example.org', '/.well-known/oauth-authorization-server/room')).toMatchObject({ host: 'example.org', upstream: 'gateway' });
    expect(matchRoute(routes, 'api.example.org', '/.well-known/oauth-authorization-server/room')).toBeUndefined();
    expect(matchRoute(routes, 'api.example.org', '/.well-known/oauth-protected-resource/v2/mcp')).toMatchObject({
      host: 'api.example.org',
      upstream: 'gateway',
    });
    expect(matchRoute(routes, 'example.org', '/room/.well-known/oauth-protected-resource/v2/mcp')).toMatchObject({ host: 'example.org', upstream: 'gateway' });
    expect(matchRoute(routes, 'api.example.org', '/.well-known/oauth-protected-resource/v2')).toMatchObject({ host: 'api.example.org', upstream: 'gateway' });
    expect(matchRoute(routes, 'example.org', '/room/.well-known/oauth-protected-resource/v2')).toMatchObject({ host: 'example.org', upstream: 'gateway' });
    // Every placement is where no earlier one is.
    const placements = routes.map((route) => `${route.host ?? '*'} ${route.match} ${route.path}`);
    expect(new Set(placements).size).toBe(placements.length);
  });
});
