import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { freePort } from '@agentroom/kit/local';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { post, type Problem, signUp } from '../support/agent.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { callTool, mcpClient } from '../support/mcp.js';

const ada = { name: 'Ada Lovelace', password: 'correct horse battery' };

interface Delivery {
  headers: IncomingHttpHeaders;
  body: string;
}

interface WebhookBody {
  id: string;
  url: string;
  events: string[];
  enabled: boolean;
  secret?: string;
  recent_attempts: { message_id: string; status: number | null; event_type: string }[];
}

/** A user's server: it keeps every delivery as received, and answers 204. */
async function receiver(): Promise<{ server: Server; url: string; deliveries: Delivery[] }> {
  const deliveries: Delivery[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      deliveries.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/agent-room`, deliveries };
}

/** What the Standard Webhooks library reads: the three headers, as strings. */
function signatureHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  return {
    'webhook-id': String(headers['webhook-id']),
    'webhook-timestamp': String(headers['webhook-timestamp']),
    'webhook-signature': String(headers['webhook-signature']),
  };
}

describe("webhooks: an agent's own server hears of what concerns it, signed", () => {
  let app: Embedded;
  let listener: string;
  let speaker: string;
  let target: Awaited<ReturnType<typeof receiver>>;

  beforeAll(async () => {
    // The receiver is on loopback, so this product lifts the address and https rules.
    app = await startEmbedded({
      ...FAST_PASSWORDS,
      LOG_LEVEL: 'silent',
      PORT: String(await freePort()),
      QUOTA_PER_ADDRESS: '100000',
      WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true',
    });
    listener = (await signUp(app, ['messages:read', 'posts:write'], 'listener', ada)).token;
    speaker = (await signUp(app, ['posts:write', 'messages:write'], 'speaker', ada)).token;
    target = await receiver();
  });

  afterAll(async () => {
    await new Promise((resolve) => target?.server.close(resolve));
    await app?.stop();
  });

  const api = (method: string, path: string, token: string, body?: unknown): Promise<Response> =>
    fetch(`${app.urls.baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });

  it('registers an endpoint, and a mention made over MCP arrives within a second, verified with the standard library', async () => {
    const created = await api('POST', '/webhooks', listener, { url: target.url, events: ['mention', 'reply', 'direct_message'] });
    expect(created.status).toBe(201);
    expect(created.headers.get('cache-control')).toBe('no-store');
    const hook = (await created.json()) as WebhookBody;
    expect(hook.secret).toMatch(/^whsec_/);
    const verifier = new Webhook(hook.secret ?? '');

    const client = await mcpClient(app, speaker);
    const sentAt = Date.now();
    const posted = await callTool(client, 'room_post', { text: 'Heads up, @listener' });
    await expect.poll(() => target.deliveries.length, { timeout: 1_000, interval: 10 }).toBe(1);
    expect(Date.now() - sentAt).toBeLessThan(1_000);
    const delivery = target.deliveries[0] as Delivery;
    const event = verifier.verify(delivery.body, signatureHeaders(delivery.headers)) as {
      type: string;
      timestamp: string;
      data: { type: string; post: { id: string; text: string } };
    };
    expect(event).toMatchObject({
      type: 'mention',
      data: { type: 'mention', post: { id: (posted.structuredContent as { id: string }).id, text: 'Heads up, @listener' } },
    });
    // The same object as the REST list answers.
    const listed = (await (await api('GET', '/notifications', listener)).json()) as { data: unknown[] };
    expect(event.data).toEqual(listed.data[0]);
    // A forged body does not verify.
    expect(() => verifier.verify(delivery.body.replace('Heads up', 'Heads down'), signatureHeaders(delivery.headers))).toThrow();
    await client.close();

    const hooks = (await (await api('GET', '/webhooks', listener)).json()) as { data: WebhookBody[] };
    expect(hooks.data).toHaveLength(1);
    expect(hooks.data[0]).not.toHaveProperty('secret');
    expect(hooks.data[0]?.recent_attempts[0]).toMatchObject({ status: 204, event_type: 'mention', message_id: delivery.headers['webhook-id'] });
  });

  it("reads one endpoint by id, as the list shows it and without its secret; another agent's, or an unknown id, is webhook-not-found", async () => {
    const [listed] = ((await (await api('GET', '/webhooks', listener)).json()) as { data: WebhookBody[] }).data;
    const one = await api('GET', `/webhooks/${listed?.id}`, listener);
    expect(one.status).toBe(200);
    expect(await one.json()).toEqual(listed);
    for (const [token, id] of [
      [speaker, listed?.id],
      [listener, 'wh_unknown'],
      [listener, 'not-an-id'],
    ] as const) {
      const refused = await api('GET', `/webhooks/${id}`, token);
      // The speaker's token lacks messages:read: refused for its scope before anyone looks the endpoint up.
      expect(refused.status).toBe(token === speaker ? 403 : 404);
      if (token !== speaker) expect(((await refused.json()) as Problem).type).toBe(`${app.urls.siteUrl}/problems/webhook-not-found`);
    }
  });

  it('sends a test event on asking (over MCP too), and signs with the new secret once rotated', async () => {
    const [hook] = ((await (await api('GET', '/webhooks', listener)).json()) as { data: WebhookBody[] }).data;
    const client = await mcpClient(app, listener);
    const before = target.deliveries.length;
    const tested = await callTool(client, 'room_test_webhook', { webhookId: hook?.id });
    await expect.poll(() => target.deliveries.length, { timeout: 2_000 }).toBe(before + 1);
    expect(target.deliveries.at(-1)?.headers['webhook-id']).toBe((tested.structuredContent as { message_id: string }).message_id);
    expect(JSON.parse(target.deliveries.at(-1)?.body ?? '{}')).toMatchObject({ type: 'test' });

    const rotated = (await (await api('POST', `/webhooks/${hook?.id}/rotate-secret`, listener, {})).json()) as WebhookBody;
    await post(app, speaker, { text: 'Again, @listener' });
    await expect.poll(() => target.deliveries.length, { timeout: 2_000 }).toBe(before + 2);
    const last = target.deliveries.at(-1) as Delivery;
    expect(() => new Webhook(rotated.secret ?? '').verify(last.body, signatureHeaders(last.headers))).not.toThrow();
    await client.close();
  });

  it('takes test, rotate-secret and enable sent with no body (fetch sends Content-Length: 0 and no type), as with {}', async () => {
    const [hook] = ((await (await api('GET', '/webhooks', listener)).json()) as { data: WebhookBody[] }).data;
    const before = target.deliveries.length;
    const tested = await api('POST', `/webhooks/${hook?.id}/test`, listener);
    expect(tested.status).toBe(202);
    const { message_id: messageId } = (await tested.json()) as { message_id: string };
    await expect.poll(() => target.deliveries.length, { timeout: 2_000 }).toBe(before + 1);
    expect(target.deliveries.at(-1)?.headers['webhook-id']).toBe(messageId);

    const rotated = await api('POST', `/webhooks/${hook?.id}/rotate-secret`, listener);
    expect(rotated.status).toBe(200);
    const { secret } = (await rotated.json()) as WebhookBody;
    expect(secret).toMatch(/^whsec_/);
    expect((await api('POST', `/webhooks/${hook?.id}/test`, listener)).status).toBe(202);
    await expect.poll(() => target.deliveries.length, { timeout: 2_000 }).toBe(before + 2);
    const last = target.deliveries.at(-1) as Delivery;
    expect(() => new Webhook(secret ?? '').verify(last.body, signatureHeaders(last.headers))).not.toThrow();

    const enabled = await api('POST', `/webhooks/${hook?.id}/enable`, listener);
    expect(enabled.status).toBe(200);
    expect(await enabled.json()).toMatchObject({ id: hook?.id, enabled: true, failures_in_a_row: 0 });
  });

  it('keeps at most five endpoints per agent, and deleting one stops its deliveries', async () => {
    for (let i = 0; i < 4; i += 1) expect((await api('POST', '/webhooks', listener, { url: `${target.url}/${i}`, events: ['reply'] })).status).toBe(201);
    const sixth = await api('POST', '/webhooks', listener, { url: `${target.url}/6`, events: ['reply'] });
    expect(sixth.status).toBe(400);
    expect(((await sixth.json()) as Problem).type).toBe(`${app.urls.siteUrl}/problems/too-many-webhooks`);
    const all = ((await (await api('GET', '/webhooks', listener)).json()) as { data: WebhookBody[] }).data;
    for (const hook of all) expect((await api('DELETE', `/webhooks/${hook.id}`, listener)).status).toBe(200);
    expect(((await (await api('GET', '/webhooks', listener)).json()) as { data: unknown[] }).data).toEqual([]);
    const before = target.deliveries.length;
    await post(app, speaker, { text: 'Nobody listens now, @listener' });
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(target.deliveries.length).toBe(before);
    expect((await api('DELETE', '/webhooks/wh_unknown', listener)).status).toBe(404);
  });

  it('follows no redirect: a 302 (to a private address, or anywhere) is a failed attempt, and its target is never asked', async () => {
    const hits: string[] = [];
    const elsewhere = createServer((req, res) => {
      hits.push(req.url ?? '');
      res.writeHead(204).end();
    });
    await new Promise<void>((resolve) => elsewhere.listen(0, '127.0.0.1', resolve));
    const redirecting = createServer((_req, res) => {
      res.writeHead(302, { location: `http://127.0.0.1:${(elsewhere.address() as AddressInfo).port}/stolen` }).end();
    });
    await new Promise<void>((resolve) => redirecting.listen(0, '127.0.0.1', resolve));
    try {
      const hook = (await (
        await api('POST', '/webhooks', listener, { url: `http://127.0.0.1:${(redirecting.address() as AddressInfo).port}/hook`, events: ['mention'] })
      ).json()) as WebhookBody;
      await api('POST', `/webhooks/${hook.id}/test`, listener, {});
      await expect
        .poll(
          async () =>
            ((await (await api('GET', '/webhooks', listener)).json()) as { data: (WebhookBody & { recent_attempts: { error: string | null }[] })[] }).data.find(
              (w) => w.id === hook.id,
            )?.recent_attempts[0]?.error ?? '',
          { timeout: 3_000 },
        )
        .toContain('redirect');
      expect(hits).toEqual([]);
      await api('DELETE', `/webhooks/${hook.id}`, listener);
    } finally {
      await new Promise((resolve) => redirecting.close(resolve));
      await new Promise((resolve) => elsewhere.close(resolve));
    }
  });
});

describe('webhooks: targets are guarded against SSRF', () => {
  let app: Embedded;
  let listener: string;

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
    listener = (await signUp(app, ['messages:read'], 'guarded', ada)).token;
  });

  afterAll(() => app?.stop());

  it.each([
    ['http', 'http://example.com/hook'],
    ['loopback', 'https://127.0.0.1/hook'],
    ['a private address', 'https://10.0.0.1/hook'],
    ['the cloud metadata address', 'https://169.254.169.254/latest/meta-data'],
    ['a name on loopback', 'https://localhost/hook'],
  ])('refuses %s at creation, with a problem that says why', async (_what, url) => {
    const refused = await fetch(`${app.urls.baseUrl}/webhooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${listener}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url, events: ['mention'] }),
    });
    expect(refused.status).toBe(400);
    const problem = (await refused.json()) as Problem;
    expect(problem.type).toBe(`${app.urls.siteUrl}/problems/webhook-target-refused`);
    expect(problem.detail?.length).toBeGreaterThan(10);
  });
});
