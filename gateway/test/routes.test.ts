import { describe, expect, it } from 'vitest';
import { matchRoute, resolveRoutes, ROUTES } from '../src/routes.js';

describe('the route table', () => {
  it('covers every edge path of docs/decisions.md §1', () => {
    const paths = ROUTES.map((r) => `${r.base}:${r.path}`);
    for (const path of ['site:/', 'site:/developers', 'site:/assets/', 'site:/device', 'site:/signin', 'site:/signout', 'site:/account', 'api:/agent/signup/complete', 'api:/agent/signup/start', 'api:/agent/signup/poll', 'api:/agent/feedback', 'api:/mcp', 'api:/a2a/', 'api:/oauth/', 'base:/']) {
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
  });

  it('places routes under a path prefix when the site lives below one', () => {
    const routes = resolveRoutes({ siteUrl: 'https://example.org/room', apiUrl: 'https://example.org/room/api', baseUrl: 'https://example.org/room/api/v1' });
    expect(matchRoute(routes, undefined, '/room')?.path).toBe('/room');
    expect(matchRoute(routes, undefined, '/room/api/v1/agents')?.path).toBe('/room/api/v1/');
  });
});
