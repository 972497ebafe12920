/* global crypto, console -- k6's Web Crypto, and its console, which writes to k6's log */
// The journeys every scenario is made of: what readers, agents, MCP clients and A2A clients do, one
// iteration each. Every request carries a `journey` tag (the thresholds and the report group by it)
// and a `name` tag (one per endpoint, so cursors and ids do not make a metric series each). Every
// check asserts what a real client depends on: the status, the shape of the body, that the
// author is the agent whose token was sent, that a retried write answers the first one; each is
// decided before k6 records it (`judge`, verdicts.js), so a run that stops mid-iteration records
// no check it did not finish.
import exec from 'k6/execution';
import http from 'k6/http';
import { Counter } from 'k6/metrics';
import { DEEP_PAGES, REQUEST_TIMEOUT } from './env.js';
import { agentsFor } from './tokens.js';
import { judge } from './verdicts.js';

/** The MCP revision the server's SDK speaks, as the conformance tests send it. */
const MCP_PROTOCOL = '2025-06-18';
const PAGE = 20;
const VIAS = ['rest', 'mcp', 'a2a', 'web'];

// Shapes (api/src/schemas.ts), checked field by field: a 200 with the wrong body is a failure.

function isInstant(value) {
  return typeof value === 'string' && !Number.isNaN(Date.parse(value));
}

const POST_FIELDS = ['id', 'agentId', 'agentName', 'humanLabel', 'text', 'via', 'createdAt'];

/** The same post, field by field (k6 parses JSON into objects whose key order varies, so no string compare). */
function samePost(a, b) {
  return Object.keys(a).length === Object.keys(b).length && POST_FIELDS.every((field) => a[field] === b[field]);
}

function isPost(value) {
  return (
    typeof value === 'object' &&
    value !== null &&
    POST_FIELDS.every((field) => typeof value[field] === 'string') &&
    VIAS.includes(value.via) &&
    isInstant(value.createdAt)
  );
}

function isMessage(value) {
  return (
    typeof value === 'object' &&
    value !== null &&
    ['id', 'fromAgentId', 'fromAgentName', 'toAgentId', 'toAgentName', 'text'].every((field) => typeof value[field] === 'string') &&
    VIAS.includes(value.via) &&
    isInstant(value.createdAt)
  );
}

/** A page: `{object: "list", data, has_more, next_cursor}`, at most `limit` items, a cursor exactly when there is more. */
function isPage(body, isItem, limit) {
  return (
    typeof body === 'object' &&
    body !== null &&
    body.object === 'list' &&
    Array.isArray(body.data) &&
    body.data.length <= limit &&
    body.data.every(isItem) &&
    typeof body.has_more === 'boolean' &&
    (body.has_more ? typeof body.next_cursor === 'string' && body.next_cursor !== '' : body.next_cursor === null)
  );
}

/** Newest first: no item is newer than the one before it. */
function newestFirst(items) {
  return items.every((item, i) => i === 0 || Date.parse(item.createdAt) <= Date.parse(items[i - 1].createdAt));
}

/**
 * What is wrong with a page that `isPage` and `newestFirst` refuse, in words: the first rule it
 * breaks. Empty when the page is whole and newest first.
 */
function pageFault(body, isItem, limit) {
  if (typeof body !== 'object' || body === null) return 'the body is not a JSON object';
  if (body.object !== 'list' || !Array.isArray(body.data)) return 'not {object: "list", data: [...]}';
  if (body.data.length > limit) return `${body.data.length} items, more than the limit of ${limit}`;
  const bad = body.data.findIndex((item) => !isItem(item));
  if (bad !== -1) return `item ${bad} is not well formed`;
  if (typeof body.has_more !== 'boolean') return 'has_more is not a boolean';
  if (body.has_more && (typeof body.next_cursor !== 'string' || body.next_cursor === '')) return 'has_more is true without a next_cursor';
  if (!body.has_more && body.next_cursor !== null) return 'has_more is false with a next_cursor';
  const late = body.data.findIndex((item, i) => i > 0 && Date.parse(item.createdAt) > Date.parse(body.data[i - 1].createdAt));
  if (late !== -1) return `item ${late} is newer than item ${late - 1}`;
  return '';
}

/**
 * The room's pages that answered 200 yet broke a rule of a page (shape, length, a post's fields,
 * has_more against next_cursor, order): never an effect of load, which fails a request instead, so
 * every scenario holds it at 0 (thresholds.js) and a run that sees one says so apart from its
 * failed requests.
 */
const brokenPages = new Counter('broken_pages');

/** How many failed pages this VU writes to the log, at most: enough to see the cause, not a flood. */
const FAULTS_LOGGED_MAX = 3;
let faultsLogged = 0;
/** How much of a failed page's body goes to the log. */
const FAULT_BODY_MAX = 16_384;

/**
 * Counts a 200 that failed its page check in `broken_pages`, and writes why to k6's log (stderr),
 * with the request id and the body as received (cut at FAULT_BODY_MAX characters), at most
 * FAULTS_LOGGED_MAX times per VU. A check alone only counts a failure; the body says which part of
 * the answer was wrong. Other statuses fail their own check and count as failed requests: they are
 * neither counted nor logged here.
 */
function reportFault(what, response, fault, journey) {
  if (fault === '' || response.status !== 200) return;
  brokenPages.add(1, { journey });
  if (faultsLogged >= FAULTS_LOGGED_MAX) return;
  faultsLogged += 1;
  const body = typeof response.body === 'string' ? response.body : String(response.body);
  // eslint-disable-next-line no-console -- k6's log is where a run's operator reads what went wrong
  console.error(
    `${what}: ${fault}; status ${response.status}, X-Request-Id ${response.headers['X-Request-Id']}, ${body.length} characters: ${body.slice(0, FAULT_BODY_MAX)}`,
  );
}

function json(response) {
  try {
    return response.json();
  } catch {
    return undefined;
  }
}

function params(journey, name, headers = {}) {
  return { headers, tags: { journey, name }, timeout: REQUEST_TIMEOUT };
}

function bearer(agent, extra = {}) {
  return { Authorization: `Bearer ${agent.token}`, ...extra };
}

const JSON_BODY = { 'Content-Type': 'application/json' };

function uniqueText(what) {
  return `k6 ${what} ${crypto.randomUUID().slice(0, 8)} (vu ${exec.vu.idInTest}, iteration ${exec.scenario.iterationInTest})`;
}

/**
 * A reader of the room, without a token: the newest page, then a few pages further back through
 * `next_cursor`, each older than the last and sharing no post with it.
 */
export function readRoom(data) {
  const journey = 'read_room';
  const first = http.get(`${data.rest}/posts?limit=${PAGE}`, params(journey, 'GET {rest}/posts'));
  let page = json(first);
  const fault = pageFault(page, isPost, PAGE);
  judge(
    first,
    { 'read_room: first page answers 200': (r) => r.status === 200, 'read_room: first page is a page of posts, newest first': () => fault === '' },
    journey,
  );
  reportFault('read_room: first page', first, fault, journey);
  const depth = Math.floor(Math.random() * (DEEP_PAGES + 1));
  for (let i = 0; i < depth && isPage(page, isPost, PAGE) && page.next_cursor !== null; i += 1) {
    const previous = page;
    const response = http.get(
      `${data.rest}/posts?limit=${PAGE}&cursor=${encodeURIComponent(previous.next_cursor)}`,
      params(journey, 'GET {rest}/posts?cursor'),
    );
    page = json(response);
    const seen = new Set(previous.data.map((post) => post.id));
    const deepFault = pageFault(page, isPost, PAGE);
    judge(
      response,
      {
        'read_room: deep page answers 200': (r) => r.status === 200,
        'read_room: deep page is a page of posts, newest first': () => deepFault === '',
        'read_room: deep page is older than the page before, with no post twice': () =>
          isPage(page, isPost, PAGE) &&
          page.data.every((post) => !seen.has(post.id)) &&
          (page.data.length === 0 ||
            previous.data.length === 0 ||
            Date.parse(page.data[0].createdAt) <= Date.parse(previous.data[previous.data.length - 1].createdAt)),
      },
      journey,
    );
    reportFault('read_room: deep page', response, deepFault, journey);
  }
}

/**
 * An agent sharing a post with an Idempotency-Key; now and then (`retryShare` of the time, always
 * in the smoke test) it retries on purpose with the same key, as a client does after a timeout:
 * the retry must answer the same post, marked replayed, and write nothing new.
 */
export function sharePost(data) {
  const journey = 'share_post';
  const { me } = agentsFor(exec.scenario.iterationInTest);
  const key = `k6-${crypto.randomUUID()}`;
  const body = JSON.stringify({ text: uniqueText('share') });
  const headers = bearer(me, { ...JSON_BODY, 'Idempotency-Key': key });
  const response = http.post(`${data.rest}/posts`, body, params(journey, 'POST {rest}/posts', headers));
  const post = json(response);
  judge(
    response,
    {
      'share_post: answers 201': (r) => r.status === 201,
      'share_post: answers the post, by this agent, via rest': () =>
        isPost(post) && post.agentId === me.id && post.agentName === me.name && post.text === JSON.parse(body).text && post.via === 'rest',
      'share_post: a first write is not marked replayed': (r) => r.headers['Idempotent-Replayed'] === undefined,
    },
    journey,
  );
  if (Math.random() >= data.settings.retryShare) return;
  const retry = http.post(`${data.rest}/posts`, body, params(journey, 'POST {rest}/posts (retry)', headers));
  const again = json(retry);
  judge(
    retry,
    {
      'share_post: the retry answers 201, marked replayed': (r) => r.status === 201 && r.headers['Idempotent-Replayed'] === 'true',
      'share_post: the retry answers the same post': () => isPost(post) && isPost(again) && samePost(again, post),
    },
    journey,
  );
}

/** An agent sending a direct message to another agent of the file, then reading its own inbox. */
export function directMessages(data) {
  const journey = 'direct_messages';
  const { me, peer } = agentsFor(exec.scenario.iterationInTest);
  const text = uniqueText('message');
  const sent = http.post(
    `${data.rest}/messages`,
    JSON.stringify({ to: peer.id, text }),
    params(journey, 'POST {rest}/messages', bearer(me, { ...JSON_BODY, 'Idempotency-Key': `k6-${crypto.randomUUID()}` })),
  );
  const message = json(sent);
  judge(
    sent,
    {
      'direct_messages: send answers 201': (r) => r.status === 201,
      'direct_messages: send answers the message, from this agent to the peer': () =>
        isMessage(message) && message.fromAgentId === me.id && message.toAgentId === peer.id && message.text === text && message.via === 'rest',
    },
    journey,
  );
  const read = http.get(`${data.rest}/messages?limit=${PAGE}`, params(journey, 'GET {rest}/messages', bearer(me)));
  const inbox = json(read);
  judge(
    read,
    {
      'direct_messages: inbox answers 200': (r) => r.status === 200,
      'direct_messages: inbox is a page of messages to this agent, newest first': () =>
        isPage(inbox, isMessage, PAGE) && inbox.data.every((m) => m.toAgentId === me.id) && newestFirst(inbox.data),
    },
    journey,
  );
}

/** One JSON-RPC POST to the stateless MCP endpoint, and its parsed answer. */
function mcpCall(data, agent, name, payload, protocol) {
  const headers = bearer(agent, { ...JSON_BODY, Accept: 'application/json, text/event-stream', ...(protocol ? { 'MCP-Protocol-Version': protocol } : {}) });
  const response = http.post(data.mcp, JSON.stringify({ jsonrpc: '2.0', ...payload }), params('mcp', name, headers));
  return { response, body: json(response) };
}

/** A successful tool result: no isError, text content, and structuredContent that `valid` accepts. */
function toolAnswered(call, id, valid) {
  const { body } = call;
  return (
    body !== undefined &&
    body.jsonrpc === '2.0' &&
    body.id === id &&
    body.error === undefined &&
    typeof body.result === 'object' &&
    body.result.isError !== true &&
    Array.isArray(body.result.content) &&
    body.result.content[0]?.type === 'text' &&
    valid(body.result.structuredContent)
  );
}

/**
 * An MCP client on Streamable HTTP, as the SDK's client does it against a stateless server: the
 * handshake (initialize, then the initialized notification), then room_read_posts and room_post
 * with an idempotency_key.
 */
export function mcpClient(data) {
  const journey = 'mcp';
  const { me } = agentsFor(exec.scenario.iterationInTest);
  const init = mcpCall(data, me, 'POST {api}/mcp initialize', {
    id: 1,
    method: 'initialize',
    params: { protocolVersion: MCP_PROTOCOL, capabilities: {}, clientInfo: { name: 'k6-load', version: '1.0.0' } },
  });
  const result = init.body?.result;
  const ready = judge(
    init.response,
    {
      'mcp: initialize answers 200': (r) => r.status === 200,
      'mcp: initialize answers the server, its tools capability and a protocol version': () =>
        init.body?.id === 1 &&
        typeof result?.protocolVersion === 'string' &&
        result.serverInfo?.name === 'agent-room' &&
        typeof result.capabilities?.tools === 'object',
    },
    journey,
  );
  if (!ready) return;
  const protocol = result.protocolVersion;
  const initialized = mcpCall(data, me, 'POST {api}/mcp notifications/initialized', { method: 'notifications/initialized' }, protocol);
  judge(initialized.response, { 'mcp: the initialized notification answers 202': (r) => r.status === 202 }, journey);

  const read = mcpCall(
    data,
    me,
    'POST {api}/mcp room_read_posts',
    { id: 2, method: 'tools/call', params: { name: 'room_read_posts', arguments: { limit: 10 } } },
    protocol,
  );
  judge(
    read.response,
    {
      'mcp: room_read_posts answers 200': (r) => r.status === 200,
      'mcp: room_read_posts answers a page of posts': () => toolAnswered(read, 2, (page) => isPage(page, isPost, 10) && newestFirst(page.data)),
    },
    journey,
  );

  const text = uniqueText('mcp post');
  const wrote = mcpCall(
    data,
    me,
    'POST {api}/mcp room_post',
    { id: 3, method: 'tools/call', params: { name: 'room_post', arguments: { text, idempotency_key: `k6-${crypto.randomUUID()}` } } },
    protocol,
  );
  judge(
    wrote.response,
    {
      'mcp: room_post answers 200': (r) => r.status === 200,
      'mcp: room_post answers the post, by this agent, via mcp': () =>
        toolAnswered(wrote, 3, (post) => isPost(post) && post.agentId === me.id && post.text === text && post.via === 'mcp'),
    },
    journey,
  );
}

/**
 * An A2A 1.0 client sending `SendMessage` to the room's endpoint (a post), with a fresh messageId
 * (the room's idempotency key for A2A); the answer is a message whose data part is the post.
 */
export function a2aSend(data) {
  const journey = 'a2a';
  const { me } = agentsFor(exec.scenario.iterationInTest);
  const text = uniqueText('a2a post');
  const id = `k6-${crypto.randomUUID()}`;
  const payload = { jsonrpc: '2.0', id, method: 'SendMessage', params: { message: { messageId: id, role: 'ROLE_USER', parts: [{ text }] } } };
  const response = http.post(
    data.a2aRoom,
    JSON.stringify(payload),
    params(journey, 'POST {api}/a2a SendMessage', bearer(me, { ...JSON_BODY, 'A2A-Version': '1.0' })),
  );
  const body = json(response);
  const answer = body?.result?.message;
  const post = Array.isArray(answer?.parts) ? answer.parts.find((part) => part.data !== undefined)?.data?.post : undefined;
  judge(
    response,
    {
      'a2a: SendMessage answers 200': (r) => r.status === 200,
      'a2a: SendMessage answers an agent message, not an error': () =>
        body?.jsonrpc === '2.0' &&
        body.id === id &&
        body.error === undefined &&
        answer?.role === 'ROLE_AGENT' &&
        answer.parts.some((part) => typeof part.text === 'string'),
      'a2a: the answer carries the post, by this agent, via a2a': () => isPost(post) && post.agentId === me.id && post.text === text && post.via === 'a2a',
    },
    journey,
  );
}

/**
 * Every journey: its tag, the exported function k6 runs, its share of a mixed iteration (mostly
 * readers, as in a room people watch), and the requests one iteration makes at most, without and
 * with a token (setup() weighs them against the target's daily quotas).
 */
export const JOURNEYS = [
  { tag: 'read_room', exec: 'readRoom', run: readRoom, weight: 50, requests: () => ({ anonymous: 1 + DEEP_PAGES, token: 0 }) },
  { tag: 'share_post', exec: 'sharePost', run: sharePost, weight: 15, requests: (settings) => ({ anonymous: 0, token: 1 + settings.retryShare }) },
  { tag: 'direct_messages', exec: 'directMessages', run: directMessages, weight: 15, requests: () => ({ anonymous: 0, token: 2 }) },
  { tag: 'mcp', exec: 'mcpClient', run: mcpClient, weight: 10, requests: () => ({ anonymous: 0, token: 4 }) },
  { tag: 'a2a', exec: 'a2aSend', run: a2aSend, weight: 10, requests: () => ({ anonymous: 0, token: 1 }) },
];

const TOTAL_WEIGHT = JOURNEYS.reduce((sum, journey) => sum + journey.weight, 0);

/** One iteration of the traffic mix: a journey drawn by weight. */
export function mixed(data) {
  let draw = Math.random() * TOTAL_WEIGHT;
  for (const journey of JOURNEYS) {
    draw -= journey.weight;
    if (draw < 0) return journey.run(data);
  }
  return JOURNEYS[0].run(data);
}
