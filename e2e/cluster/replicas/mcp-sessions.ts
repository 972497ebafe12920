import { request as httpRequest } from 'node:http';
import { performance } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvedAgent, approvedToken, until } from '@agentroom/testkit';
import { Updates } from '../../support/mcp-changes.js';
import type { Replicas } from '../../support/replicas.js';

/** How long a change may take to be told here (`npm run bench` measures the delay). */
const TOLD_WITHIN_MS = 5_000;

/**
 * A fetch that sends a request's GET to one edge and everything else to the other, each with the
 * deployment's public Host (the one MCP's DNS-rebinding check expects), as a balancer might.
 */
function splitFetch(gets: string, posts: string, host: string): typeof fetch {
  return (input, init) => {
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    const method = init?.method ?? 'GET';
    const target = new URL(url.pathname + url.search, method === 'GET' ? gets : posts);
    const headers: Record<string, string> = { host };
    new Headers(init?.headers).forEach((value, name) => {
      headers[name] = value;
    });
    return new Promise<Response>((resolve, reject) => {
      const request = httpRequest(target, { method, headers, signal: init?.signal ?? undefined }, (answer) => {
        const responseHeaders = new Headers();
        for (const [name, value] of Object.entries(answer.headers)) if (typeof value === 'string') responseHeaders.set(name, value);
        const body = answer.statusCode === 204 || answer.statusCode === 202 ? null : (Readable.toWeb(answer) as ReadableStream<Uint8Array>);
        resolve(new Response(body, { status: answer.statusCode ?? 0, headers: responseHeaders }));
      });
      request.on('error', reject);
      if (typeof init?.body === 'string') request.write(init.body);
      request.end();
    });
  };
}

/**
 * A 2025-11-25 session is served by any edge replica (docs/decisions.md §47): a host whose GET
 * stream reached edge 2 while its subscribe and everything else went to edge 1 is still told of
 * a mention on its stream.
 */
export function mcpSessionsSuite(replicas: () => Replicas): void {
  describe('an MCP 2025-11-25 session across two edge processes', () => {
    let listener: { token: string; agentId: string };
    let poster: string;
    const clients: Client[] = [];

    beforeAll(async () => {
      const { cluster } = replicas();
      listener = await approvedAgent(cluster.origin, ['messages:read'], 'session-listener');
      poster = await approvedToken(cluster.origin, ['posts:write'], 'session-poster');
    }, 30_000);

    afterAll(async () => {
      for (const client of clients) await client.close().catch(() => undefined);
    });

    it("tells a host its session's changes on a stream another edge serves", async () => {
      const { cluster, edge1, edge2, metric } = replicas();
      const streamsBefore = await metric('edge-2', 'agentroom_mcp_change_watches', { kind: 'session_streams' });
      const client = new Client({ name: 'split-host', version: '1.0.0' });
      clients.push(client);
      const transport = new StreamableHTTPClientTransport(new URL(`${cluster.origin}/api/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${listener.token}` } },
        fetch: splitFetch(edge2, edge1, new URL(cluster.origin).host),
      });
      const updates = new Updates();
      client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => updates.told(notification.params.uri));
      await client.connect(transport);
      // The client opens its GET stream after initialize: it is edge 2's.
      await until(
        'the session stream open on edge 2',
        async () => (await metric('edge-2', 'agentroom_mcp_change_watches', { kind: 'session_streams' })) > streamsBefore,
      );
      const uri = `agentroom://agents/${listener.agentId}/notifications`;
      await client.subscribeResource({ uri });
      // Edge 2 hears of the subscription through the store and watches the agent's feed.
      await until('edge 2 watching the agent', async () => (await metric('edge-2', 'agentroom_mcp_change_watches', { kind: 'notifications' })) > 0);

      const sent = performance.now();
      const created = await fetch(`${edge1}/api/v1/posts`, {
        method: 'POST',
        headers: { authorization: `Bearer ${poster}`, 'content-type': 'application/json' },
        body: JSON.stringify({ text: `Across replicas, @${listener.agentId}` }),
      });
      expect(created.status).toBe(201);
      const told = await updates.next(uri, TOLD_WITHIN_MS);
      console.info(`2025-11-25 session across edges: mention told after ${Math.round(told - sent)} ms`);

      // DELETE through edge 1 ends the stream on edge 2.
      await transport.terminateSession();
      await until(
        'the session stream closed on edge 2',
        async () => (await metric('edge-2', 'agentroom_mcp_change_watches', { kind: 'session_streams' })) === streamsBefore,
      );
    });
  });
}
