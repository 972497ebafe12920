import { readFileSync } from 'node:fs';
import { CancelTaskRequest, GetTaskRequest, ListTasksRequest, TaskPushNotificationConfig } from '@a2a-js/sdk';
import { PushNotificationNotSupportedError } from '@a2a-js/sdk/errors';
import { freePort } from '@agentroom/kit/local';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { FAST_PASSWORDS } from '../support/env.js';
import { a2aClient, rpcFailure, send, textMessage } from '../support/a2a.js';
import { signUp } from '../support/agent.js';

// ajv-formats is CommonJS: its default export arrives wrapped under ESM.
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule) as unknown as (ajv: Ajv2020) => void;

/**
 * A2A 1.0's JSON Schema (e2e/fixtures/a2a-v1.schema.json, made from the A2A project's a2a.proto by
 * scripts/a2a-json-schema.py): every schema in it is registered by the `$id` its references name.
 */
const bundle = JSON.parse(readFileSync(new URL('../fixtures/a2a-v1.schema.json', import.meta.url), 'utf8')) as { $defs: Record<string, { $id: string }> };
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
for (const schema of Object.values(bundle.$defs)) ajv.addSchema(schema);

/** What `value` breaks of the schema of the proto message `name` (lf.a2a.v1.AgentCard, google.rpc.ErrorInfo), as readable lines. */
function violations(name: string, value: unknown): string[] {
  const validate = ajv.getSchema(`${name}.jsonschema.json`);
  if (!validate) throw new Error(`no schema for ${name}`);
  return validate(value) ? [] : (validate.errors ?? []).map((error) => `${name}${error.instancePath} ${error.message ?? ''} ${JSON.stringify(error.params)}`);
}

/** The fields A2A 0.3's card has and 1.0's does not. */
const LEGACY_CARD_FIELDS = ['url', 'preferredTransport', 'protocolVersion', 'security', 'supportsAuthenticatedExtendedCard', 'additionalInterfaces'];

interface RpcAnswer {
  status: number;
  body: { jsonrpc?: unknown; id?: unknown; result?: unknown; error?: { code: number; message: string; data?: unknown } };
}

/** A raw JSON-RPC call, in 1.0 (`A2A-Version: 1.0`) or 0.3 (no header), for what the SDK client hides or never sends. */
async function rpc(url: string, version: '1.0' | '0.3', method: string, params: unknown, token?: string): Promise<RpcAnswer> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (version === '1.0') headers['A2A-Version'] = '1.0';
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  const response = await fetch(url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 'req-1', method, params }) });
  return { status: response.status, body: (await response.json()) as RpcAnswer['body'] };
}

/** A JSON-RPC 2.0 answer to request `req-1`: exactly one of result and error. */
function expectEnvelope(answer: RpcAnswer): void {
  expect(answer.body.jsonrpc).toBe('2.0');
  expect(answer.body.id).toBe('req-1');
  expect('result' in answer.body !== 'error' in answer.body).toBe(true);
}

/** A2A 1.0's JSON-RPC error: its code, and `data` holding google.rpc.ErrorInfo as JSON's `Any` carries it (A2A's domain, or the room's host for its problems). */
function expectV1Error(answer: RpcAnswer, code: number, reason: string, domain = 'a2a-protocol.org'): void {
  expectEnvelope(answer);
  expect(answer.body.error?.code, JSON.stringify(answer.body)).toBe(code);
  expect(typeof answer.body.error?.message).toBe('string');
  const details = answer.body.error?.data;
  expect(Array.isArray(details)).toBe(true);
  for (const detail of details as Record<string, unknown>[]) {
    const { '@type': type, ...info } = detail;
    expect(type).toBe('type.googleapis.com/google.rpc.ErrorInfo');
    expect(violations('google.rpc.ErrorInfo', info)).toEqual([]);
  }
  expect((details as { reason: string; domain: string }[])[0]).toMatchObject({ reason, domain });
}

/** Parts of a message, as 1.0 and 0.3 write them: one file part, by URL. */
const FILE_PART_V1 = { url: 'https://example.com/cat.png', mediaType: 'image/png', filename: 'cat.png' };
const FILE_PART_V03 = { kind: 'file', file: { uri: 'https://example.com/cat.png', mimeType: 'image/png', name: 'cat.png' } };

describe('A2A 1.0 to the letter of its specification (embedded)', () => {
  let app: Embedded;
  let alice: string;
  let bobId: string;
  let endpoints: string[];
  let cards: string[];

  beforeAll(async () => {
    app = await startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(await freePort()), QUOTA_PER_ADDRESS: '100000' });
    alice = (await signUp(app, ['messages:write', 'posts:write'], 'alice', { name: 'Ada Lovelace', password: 'correct horse battery' })).token;
    await signUp(app, ['messages:read'], 'bob', { name: 'Alan Turing', password: 'the imitation game' });
    const agents = (await (await fetch(`${app.urls.baseUrl}/agents`)).json()) as { data: { id: string; agentName: string }[] };
    bobId = agents.data.find((agent) => agent.agentName === 'bob')?.id ?? '';
    endpoints = [`${app.urls.apiUrl}/a2a`, `${app.urls.apiUrl}/a2a/${bobId}`];
    cards = [`${app.urls.siteUrl}/.well-known/agent-card.json`, `${app.urls.apiUrl}/a2a/${bobId}/.well-known/agent-card.json`];
  });

  afterAll(() => app.stop());

  it('answers any method but POST on every A2A endpoint with 405, Allow: POST and a problem (and the cards any but GET)', async () => {
    for (const url of endpoints) {
      for (const method of ['GET', 'PUT', 'PATCH', 'DELETE']) {
        const response = await fetch(url, { method });
        expect(response.status, `${method} ${url}`).toBe(405);
        expect(response.headers.get('allow')).toBe('POST');
        expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
        expect(await response.json()).toMatchObject({ status: 405, type: `${app.urls.siteUrl}/problems/method-not-allowed`, code: 'invalid_request' });
      }
      const head = await fetch(url, { method: 'HEAD' });
      expect(head.status).toBe(405);
      expect(head.headers.get('allow')).toBe('POST');
      // A plain OPTIONS (no Access-Control-Request-Method: not a preflight) learns the same.
      const options = await fetch(url, { method: 'OPTIONS' });
      expect(options.status).toBe(204);
      expect(options.headers.get('allow')).toBe('POST');
    }
    // The cards, the other way round: read-only.
    for (const url of cards) {
      const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      expect(response.status, `POST ${url}`).toBe(405);
      expect(response.headers.get('allow')).toBe('GET, HEAD');
    }
  });

  it("answers with A2A's own errors through the SDK's client: unknown tasks, content it cannot take, push notifications", async () => {
    const client = await a2aClient(`${app.urls.apiUrl}/a2a/${bobId}`);
    const forTask = { ...textMessage(['go on with that task']), taskId: 'task-unknown' };
    expect(await rpcFailure(send(client, forTask, alice))).toMatchObject({ code: -32001, reason: 'TASK_NOT_FOUND' });
    const fileOnly = textMessage([]);
    fileOnly.parts = [
      { content: { $case: 'url', value: FILE_PART_V1.url }, metadata: undefined, filename: FILE_PART_V1.filename, mediaType: FILE_PART_V1.mediaType },
    ];
    expect(await rpcFailure(send(client, fileOnly, alice))).toMatchObject({ code: -32005, reason: 'CONTENT_TYPE_NOT_SUPPORTED' });
    expect(await rpcFailure(client.getTask(GetTaskRequest.fromJSON({ id: 'task-1' })))).toMatchObject({ code: -32001, reason: 'TASK_NOT_FOUND' });
    expect(await rpcFailure(client.cancelTask(CancelTaskRequest.fromJSON({ id: 'task-1' })))).toMatchObject({ code: -32001, reason: 'TASK_NOT_FOUND' });
    expect(await client.listTasks(ListTasksRequest.fromJSON({}))).toMatchObject({ tasks: [], nextPageToken: '', totalSize: 0 });
    // The client refuses push notification calls itself, reading the card's `pushNotifications: false`;
    // the room's own answer to them is read raw below.
    expect(() => client.createTaskPushNotificationConfig(TaskPushNotificationConfig.fromJSON({ taskId: 'task-1', url: 'https://example.com/hook' }))).toThrow(
      PushNotificationNotSupportedError,
    );
  });

  it("answers every 1.0 method the room serves with JSON that A2A 1.0's schema accepts", async () => {
    for (const endpoint of endpoints) {
      const message = { messageId: crypto.randomUUID(), role: 'ROLE_USER', parts: [{ text: 'held to the schema' }] };
      const sent = await rpc(endpoint, '1.0', 'SendMessage', { message }, alice);
      expectEnvelope(sent);
      expect(violations('lf.a2a.v1.SendMessageResponse', sent.body.result)).toEqual([]);
      expect(sent.body.result).toMatchObject({ message: { role: 'ROLE_AGENT' } });

      const listed = await rpc(endpoint, '1.0', 'ListTasks', {});
      expectEnvelope(listed);
      expect(violations('lf.a2a.v1.ListTasksResponse', listed.body.result)).toEqual([]);
      expect(listed.body.result).toMatchObject({ tasks: [], nextPageToken: '', totalSize: 0 });

      // The room's own refusals ride in the same ErrorInfo, under its host's domain.
      expectV1Error(
        await rpc(endpoint, '1.0', 'SendMessage', { message: { ...message, messageId: crypto.randomUUID() } }),
        -32041,
        'NO_TOKEN',
        new URL(app.urls.siteUrl).host,
      );
      expectV1Error(
        await rpc(endpoint, '1.0', 'SendMessage', { message: { ...message, messageId: crypto.randomUUID(), taskId: 'task-unknown' } }, alice),
        -32001,
        'TASK_NOT_FOUND',
      );
      expectV1Error(
        await rpc(endpoint, '1.0', 'SendMessage', { message: { ...message, messageId: crypto.randomUUID(), parts: [FILE_PART_V1] } }, alice),
        -32005,
        'CONTENT_TYPE_NOT_SUPPORTED',
      );
      expectV1Error(await rpc(endpoint, '1.0', 'GetTask', { id: 'task-1' }), -32001, 'TASK_NOT_FOUND');
      expectV1Error(await rpc(endpoint, '1.0', 'CancelTask', { id: 'task-1' }), -32001, 'TASK_NOT_FOUND');
      expectV1Error(
        await rpc(endpoint, '1.0', 'CreateTaskPushNotificationConfig', { taskId: 'task-1', url: 'https://example.com/hook' }),
        -32003,
        'PUSH_NOTIFICATION_NOT_SUPPORTED',
      );
      expectV1Error(
        await rpc(endpoint, '1.0', 'GetTaskPushNotificationConfig', { taskId: 'task-1', id: 'config-1' }),
        -32003,
        'PUSH_NOTIFICATION_NOT_SUPPORTED',
      );
      expectV1Error(await rpc(endpoint, '1.0', 'ListTaskPushNotificationConfigs', { taskId: 'task-1' }), -32003, 'PUSH_NOTIFICATION_NOT_SUPPORTED');
      expectV1Error(
        await rpc(endpoint, '1.0', 'DeleteTaskPushNotificationConfig', { taskId: 'task-1', id: 'config-1' }),
        -32003,
        'PUSH_NOTIFICATION_NOT_SUPPORTED',
      );
      // The card says no streaming and no extended card: A2A answers those methods UnsupportedOperation,
      // and the refusal is an answer, not an error written to the product's stderr.
      const stderr = vi.spyOn(console, 'error');
      try {
        expectV1Error(
          await rpc(endpoint, '1.0', 'SendStreamingMessage', { message: { ...message, messageId: crypto.randomUUID() } }, alice),
          -32004,
          'UNSUPPORTED_OPERATION',
        );
        expectV1Error(await rpc(endpoint, '1.0', 'SubscribeToTask', { id: 'task-1' }), -32004, 'UNSUPPORTED_OPERATION');
        expect(stderr.mock.calls).toEqual([]);
      } finally {
        stderr.mockRestore();
      }
      expectV1Error(await rpc(endpoint, '1.0', 'GetExtendedAgentCard', {}, alice), -32004, 'UNSUPPORTED_OPERATION');
    }
  });

  it("answers 0.3's method names with the same codes", async () => {
    for (const endpoint of endpoints) {
      const message = { kind: 'message', messageId: crypto.randomUUID(), role: 'user', parts: [{ kind: 'text', text: 'from an 0.3 client' }] };
      const cases: [string, unknown, number][] = [
        ['message/send', { message: { ...message, messageId: crypto.randomUUID(), taskId: 'task-unknown' } }, -32001],
        ['message/send', { message: { ...message, messageId: crypto.randomUUID(), parts: [FILE_PART_V03] } }, -32005],
        ['tasks/get', { id: 'task-1' }, -32001],
        ['tasks/cancel', { id: 'task-1' }, -32001],
        ['tasks/pushNotificationConfig/set', { taskId: 'task-1', pushNotificationConfig: { url: 'https://example.com/hook' } }, -32003],
        ['tasks/pushNotificationConfig/get', { id: 'task-1', pushNotificationConfigId: 'config-1' }, -32003],
        ['tasks/pushNotificationConfig/list', { id: 'task-1' }, -32003],
        ['tasks/pushNotificationConfig/delete', { id: 'task-1', pushNotificationConfigId: 'config-1' }, -32003],
        ['message/stream', { message: { ...message, messageId: crypto.randomUUID() } }, -32004],
        ['tasks/resubscribe', { id: 'task-1' }, -32004],
      ];
      const stderr = vi.spyOn(console, 'error');
      try {
        for (const [method, params, code] of cases) {
          const answer = await rpc(endpoint, '0.3', method, params, alice);
          expectEnvelope(answer);
          expect(answer.body.error?.code, `${method} ${JSON.stringify(answer.body)}`).toBe(code);
        }
        expect(stderr.mock.calls).toEqual([]);
      } finally {
        stderr.mockRestore();
      }
    }
  });

  it("serves 1.0 cards that A2A 1.0's AgentCard schema accepts, without 0.3's fields", async () => {
    for (const url of cards) {
      const response = await fetch(url, { headers: { 'A2A-Version': '1.0' } });
      expect(response.status).toBe(200);
      const card = (await response.json()) as Record<string, unknown>;
      expect(violations('lf.a2a.v1.AgentCard', card)).toEqual([]);
      for (const field of LEGACY_CARD_FIELDS) expect(card, `${url} has ${field}`).not.toHaveProperty(field);
      // 0.3 clients (no header) read the 0.3 card still, which the 1.0 schema refuses (so it does check).
      const legacy = (await (await fetch(url)).json()) as Record<string, unknown>;
      expect(legacy).toMatchObject({ protocolVersion: '0.3', preferredTransport: 'JSONRPC' });
      expect(violations('lf.a2a.v1.AgentCard', legacy)).not.toEqual([]);
    }
  });

  it('serves every card with ETag and Last-Modified, and answers 304 to a matching If-None-Match or If-Modified-Since', async () => {
    for (const url of cards) {
      const tags = new Set<string>();
      const versions: Record<string, string>[] = [{ 'A2A-Version': '1.0' }, {}];
      for (const version of versions) {
        const first = await fetch(url, { headers: version });
        expect(first.status).toBe(200);
        const etag = first.headers.get('etag');
        const lastModified = first.headers.get('last-modified');
        expect(etag, url).toMatch(/^(W\/)?"[^"]+"$/);
        expect(lastModified, url).not.toBeNull();
        expect(Date.parse(lastModified ?? '')).toBeLessThanOrEqual(Date.now());
        tags.add(etag ?? '');

        const matching = await fetch(url, { headers: { ...version, 'If-None-Match': etag ?? '' } });
        expect(matching.status).toBe(304);
        expect(await matching.text()).toBe('');
        expect(matching.headers.get('etag')).toBe(etag);
        expect((await fetch(url, { headers: { ...version, 'If-Modified-Since': lastModified ?? '' } })).status).toBe(304);
        const later = new Date(Date.parse(lastModified ?? '') + 60_000).toUTCString();
        expect((await fetch(url, { headers: { ...version, 'If-Modified-Since': later } })).status).toBe(304);

        const earlier = new Date(Date.parse(lastModified ?? '') - 60_000).toUTCString();
        expect((await fetch(url, { headers: { ...version, 'If-Modified-Since': earlier } })).status).toBe(200);
        expect((await fetch(url, { headers: { ...version, 'If-None-Match': '"something-else"' } })).status).toBe(200);
      }
      // The 1.0 and the 0.3 card are two representations: two tags.
      expect(tags.size).toBe(2);
    }
  });
});
