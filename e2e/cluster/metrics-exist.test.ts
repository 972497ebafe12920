import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { approvedAgent, sleep, until } from '@agentroom/testkit';
import { parse, parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { a2aClient, send, textMessage } from '../support/a2a.js';
import { goTool } from '../support/go-tools.js';
import { type ClusterProcess, startClusterProcess } from '../support/processes.js';
import { exposedMetrics, promqlReferences, type PromqlReferences, unknownReferences, withoutGrafanaIntervals } from '../support/promql.js';
import { SseClient } from '../support/sse.js';

/**
 * Every metric and label a dashboard panel or an alerting or recording rule of the chart reads is
 * exported by a running cluster (docs/decisions.md §52): `npm run cluster`'s processes, after
 * traffic down every path the dashboards show, are scraped on `/metrics`, and each PromQL
 * expression is parsed by Prometheus' own grammar. A misspelt name or label fails here instead of
 * showing "No data" to an SRE in the middle of an incident.
 */
const root = fileURLToPath(new URL('../../', import.meta.url));
const chart = join(root, 'charts/agent-room');
const run = promisify(execFile);

/**
 * Labels Prometheus gives every series it scrapes through the chart's ServiceMonitor (the
 * Prometheus Operator's relabelling): none of them is the process's to export.
 */
const TARGET_LABELS = new Set(['job', 'instance', 'namespace', 'pod', 'container', 'endpoint', 'service']);

/**
 * Metrics that are not ours, with their labels, that rules and dashboards may read: Prometheus' own
 * `up` for each target, and kube-state-metrics' figures of the Deployments, StatefulSets and pods
 * the chart makes (the Kubernetes side of "a service without ready replicas" and
 * "restarts in a loop"). Nothing else: a name outside this list must be exported by a process.
 */
const ALLOWED: Map<string, Set<string>> = new Map([
  // Prometheus: 1 when the target answered its last scrape.
  ['up', new Set<string>()],
  // kube-state-metrics, Deployments: replicas wanted and available.
  ['kube_deployment_status_replicas_available', new Set(['deployment'])],
  ['kube_deployment_spec_replicas', new Set(['deployment'])],
  ['kube_deployment_status_replicas', new Set(['deployment'])],
  // kube-state-metrics, StatefulSets (the bundled Redis and PostgreSQL): replicas wanted and ready.
  ['kube_statefulset_replicas', new Set(['statefulset'])],
  ['kube_statefulset_status_replicas_ready', new Set(['statefulset'])],
  // kube-state-metrics, pods: restarts, readiness and phase of each container and pod.
  ['kube_pod_container_status_restarts_total', new Set(['pod', 'container', 'uid'])],
  ['kube_pod_status_ready', new Set(['pod', 'uid', 'condition'])],
  ['kube_pod_status_phase', new Set(['pod', 'uid', 'phase'])],
  ['kube_pod_labels', new Set(['pod', 'uid', 'label_app_kubernetes_io_component', 'label_app_kubernetes_io_instance', 'label_app_kubernetes_io_name'])],
  // kube-state-metrics, HorizontalPodAutoscalers: at their maximum.
  ['kube_horizontalpodautoscaler_status_current_replicas', new Set(['horizontalpodautoscaler'])],
  ['kube_horizontalpodautoscaler_spec_max_replicas', new Set(['horizontalpodautoscaler'])],
]);

const ruleSchema = z.object({
  record: z.string().optional(),
  alert: z.string().optional(),
  expr: z.union([z.string(), z.number()]),
  labels: z.record(z.string(), z.string()).optional(),
});
const prometheusRule = z.object({
  kind: z.literal('PrometheusRule'),
  spec: z.object({ groups: z.array(z.object({ name: z.string(), rules: z.array(ruleSchema) })) }),
});
type Rule = z.output<typeof ruleSchema>;

/** Every query of a dashboard: each panel target's `expr` (rows' panels included) and each variable's `label_values(selector, label)`. */
function dashboardQueries(board: unknown): { where: string; expr: string; label?: string }[] {
  const parsed = z
    .object({
      panels: z.array(
        z.looseObject({ title: z.string(), targets: z.array(z.object({ expr: z.string() }).loose()).optional(), panels: z.array(z.unknown()).optional() }),
      ),
      templating: z.object({ list: z.array(z.looseObject({ name: z.string(), definition: z.string().optional() })) }),
    })
    .loose()
    .parse(board);
  const queries: { where: string; expr: string; label?: string }[] = [];
  for (const panel of parsed.panels) for (const target of panel.targets ?? []) queries.push({ where: `panel "${panel.title}"`, expr: target.expr });
  for (const variable of parsed.templating.list) {
    const labelValues = /^label_values\((.*),\s*(\w+)\)$/.exec(variable.definition ?? '');
    if (labelValues) queries.push({ where: `variable $${variable.name}`, expr: labelValues[1] ?? '', label: labelValues[2] ?? '' });
  }
  return queries;
}

/** The rules the chart renders with `prometheusRules.enabled=true`, when it has that value; none before. */
async function chartRules(): Promise<Rule[]> {
  const values = parse(await readFile(join(chart, 'values.yaml'), 'utf8')) as Record<string, unknown>;
  const asked = values.prometheusRules;
  if (typeof asked !== 'object' || asked === null) return [];
  // Rules link their runbooks: the chart asks where they are served.
  const runbooks = 'runbookBaseUrl' in asked ? ['--set', 'prometheusRules.runbookBaseUrl=https://runbooks.example.com/agent-room'] : [];
  const { stdout } = await run(goTool('helm'), ['template', 'room', chart, '--namespace', 'agent-room', '--set', 'prometheusRules.enabled=true', ...runbooks], {
    maxBuffer: 64 * 1024 * 1024,
  });
  const rules: Rule[] = [];
  for (const doc of parseAllDocuments(stdout)) {
    const object = doc.toJS() as { kind?: string } | null;
    if (object?.kind !== 'PrometheusRule') continue;
    for (const group of prometheusRule.parse(object).spec.groups) rules.push(...group.rules);
  }
  expect(rules.length, 'prometheusRules.enabled=true renders no rule').toBeGreaterThan(0);
  return rules;
}

interface Checked {
  where: string;
  expr: string;
  references: PromqlReferences;
  label?: string;
}

/** Each expression parsed; what the expressions and the recording rules refer to, and what no process exports. */
function check(queries: Checked[], exported: Map<string, Set<string>>): string[] {
  return queries.flatMap(({ where, expr, references, label }) => {
    const problems = unknownReferences(references, exported, TARGET_LABELS);
    if (label !== undefined) {
      const carried = references.selectors.flatMap((s) => [...(exported.get(s.metric ?? '') ?? [])]);
      if (!carried.includes(label) && !TARGET_LABELS.has(label)) problems.push(`label_values reads label ${label}, which it does not carry`);
    }
    return problems.map((problem) => `${where}: ${problem}\n    ${expr}`);
  });
}

/** Recording rules' series as metrics of their own: the rule's labels, those it groups by, and those of what it reads. */
function withRecordingRules(exported: Map<string, Set<string>>, rules: Rule[]): Map<string, Set<string>> {
  const all = new Map([...exported].map(([name, labels]) => [name, new Set(labels)]));
  // In order, several times over: a recording rule may read another's series.
  for (let pass = 0; pass < 3; pass += 1)
    for (const rule of rules) {
      if (rule.record === undefined) continue;
      const references = promqlReferences(String(rule.expr));
      const labels = new Set([
        ...Object.keys(rule.labels ?? {}),
        ...references.groupings.flatMap((g) => g.labels),
        ...references.selectors.flatMap((s) => [...(all.get(s.metric ?? '') ?? [])]),
      ]);
      all.set(rule.record, new Set([...(all.get(rule.record) ?? []), ...labels]));
    }
  return all;
}

interface Ready {
  router: string;
  edges: string[];
  metrics: Record<string, string>;
}

describe('every metric the dashboards and rules read exists on a running cluster', () => {
  let cluster: ClusterProcess<Ready>;
  let receiver: Server;
  let received = 0;
  const scraped = new Map<string, string>();
  const exported = new Map<string, Set<string>>();

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        received += 1;
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    // Delivery may POST to loopback; a revoked token's stream ends within a heartbeat (200 ms here).
    // The launcher's environment is read when it is spawned; this worker's is given back at once.
    const env = { WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true', LIVE_HEARTBEAT_MS: '200' };
    const before = Object.fromEntries(Object.keys(env).map((name) => [name, process.env[name]]));
    Object.assign(process.env, env);
    try {
      cluster = await startClusterProcess<Ready>([], 90_000);
    } finally {
      for (const [name, value] of Object.entries(before)) {
        if (value === undefined) Reflect.deleteProperty(process.env, name);
        else process.env[name] = value;
      }
    }
    const { router } = cluster.ready;
    const base = `${router}/api/v1`;
    const api = (method: string, path: string, token: string | undefined, body?: unknown): Promise<Response> =>
      fetch(`${base}${path}`, {
        method,
        headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });

    // Two agents: a writer, and a listener with a webhook; a third whose token is revoked mid-stream.
    const writer = await approvedAgent(router, ['posts:write', 'messages:read', 'messages:write'], 'metrics-writer');
    const listener = await approvedAgent(router, ['posts:write', 'messages:read'], 'metrics-listener');
    const shortLived = await approvedAgent(router, ['messages:read'], 'metrics-short');
    const hook = await api('POST', '/webhooks', listener.token, {
      url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`,
      events: ['mention', 'direct_message'],
    });
    expect(hook.status).toBe(201);

    // Live feeds: the posts stream, and a messages stream whose token is revoked (the server ends it).
    const posts = await SseClient.connect(`${base}/posts/stream`);
    const messages = await SseClient.connect(`${base}/messages/stream`, { authorization: `Bearer ${shortLived.token}` });

    // REST: a post that mentions the listener, a direct message to it, pages with and without a cursor.
    const word = `gauge${randomUUID().slice(0, 8)}`;
    expect((await api('POST', '/posts', writer.token, { text: `${word} for @metrics-listener` })).status).toBe(201);
    expect((await api('POST', '/posts', listener.token, { text: `${word} heard` })).status).toBe(201);
    expect((await api('POST', '/messages', writer.token, { to: listener.agentId, text: 'a direct message' })).status).toBe(201);
    const page = (await (await api('GET', '/posts?limit=1', undefined)).json()) as { next_cursor: string };
    expect((await api('GET', `/posts?limit=1&cursor=${page.next_cursor}`, undefined)).status).toBe(200);
    expect((await api('GET', '/messages?limit=5', listener.token)).status).toBe(200);

    // MCP and A2A.
    const mcp = new McpClient({ name: 'metrics-test', version: '1.0.0' });
    await mcp.connect(
      new StreamableHTTPClientTransport(new URL(`${router}/api/mcp`), { requestInit: { headers: { authorization: `Bearer ${writer.token}` } } }),
    );
    await mcp.callTool({ name: 'room_read_posts', arguments: {} });
    await mcp.callTool({ name: 'room_post', arguments: { text: `${word} through MCP` } });
    await send(await a2aClient(router), textMessage([`${word} through A2A`]), writer.token).catch(() => undefined);

    // The revocation, the webhooks, the record: each seen through.
    const revoked = await fetch(`${router}/api/oauth/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: shortLived.token }),
    });
    expect(revoked.status).toBe(200);
    await Promise.race([messages.ended, new Promise((_, reject) => setTimeout(() => reject(new Error('the revoked stream stayed open')), 10_000))]);
    await posts.waitForEvents(1, 5_000);
    await until('the webhooks of the mention and the direct message delivered', () => Promise.resolve(received >= 2), 15_000);
    await until(
      'the post found by search in the record',
      async () => (((await (await api('GET', `/posts/search?q=${word}`, undefined)).json()) as { data?: unknown[] }).data?.length ?? 0) >= 1,
      15_000,
    );
    await mcp.close();
    posts.close();
    // Delivery reports its queue every 500 ms.
    await sleep(1_000);

    for (const [name, url] of Object.entries(cluster.ready.metrics)) {
      const response = await fetch(url);
      expect(response.status, name).toBe(200);
      scraped.set(name, await response.text());
    }
    for (const text of scraped.values())
      for (const [metric, labels] of exposedMetrics(text)) exported.set(metric, new Set([...(exported.get(metric) ?? []), ...labels]));
  }, 240_000);

  afterAll(async () => {
    await cluster?.stop();
    await new Promise((resolve) => receiver?.close(resolve));
  });

  it('scrapes every process of the cluster, after traffic over REST, MCP and A2A', () => {
    expect([...scraped.keys()]).toEqual(expect.arrayContaining(['room', 'messaging', 'delivery', 'auth', 'record', 'edge-1', 'edge-2']));
    const edge = [...scraped].filter(([name]) => name.startsWith('edge')).map(([, text]) => text);
    for (const protocol of ['rest', 'mcp', 'a2a']) expect(edge.join('\n')).toContain(`protocol="${protocol}"`);
    expect(scraped.get('delivery')).toMatch(/agentroom_webhook_deliveries_total\{outcome="delivered"\} [1-9]/);
    expect(scraped.get('delivery')).toMatch(/^agentroom_webhook_queue_oldest_age_seconds 0$/m);
    for (const name of ['room', 'messaging', 'delivery', 'auth', 'edge-1', 'edge-2'])
      expect(scraped.get(name), name).toMatch(new RegExp(`^agentroom_redis_up\\{service="${name.replace(/-\d$/, '')}"\\} 1$`, 'm'));
  });

  it('finds in them every metric and label of every dashboard panel and variable, and of every rule the chart renders', async () => {
    const dir = join(chart, 'files/dashboards');
    const queries: Checked[] = [];
    for (const file of (await readdir(dir)).filter((name) => name.endsWith('.json'))) {
      const board: unknown = JSON.parse(await readFile(join(dir, file), 'utf8'));
      for (const { where, expr, label } of dashboardQueries(board)) {
        const references = promqlReferences(withoutGrafanaIntervals(expr));
        queries.push({ where: `${file} ${where}`, expr, references, ...(label === undefined ? {} : { label }) });
      }
    }
    expect(queries.length).toBeGreaterThan(50);
    const rules = await chartRules();
    for (const rule of rules)
      queries.push({ where: `rule ${rule.record ?? rule.alert}`, expr: String(rule.expr), references: promqlReferences(String(rule.expr)) });
    const known = withRecordingRules(new Map([...exported, ...ALLOWED]), rules);
    expect(check(queries, known)).toEqual([]);
  });

  it('fails on a misspelt metric, a label its metric does not carry, a grouping by a label nobody has, and an expression that is not PromQL', () => {
    const known = new Map([...exported, ...ALLOWED]);
    const of = (expr: string): Checked => ({ where: 'made up', expr, references: promqlReferences(expr) });
    expect(check([of('sum(rate(agentroom_http_request_duration_seconds_count{namespace=~"x"}[5m]))')], known)).toEqual([]);
    expect(check([of('rate(agentroom_webhook_queue_dept[5m])')], known)).toEqual([
      'made up: metric agentroom_webhook_queue_dept is exported by no process\n    rate(agentroom_webhook_queue_dept[5m])',
    ]);
    expect(check([of('agentroom_redis_up{servise="edge"}')], known)[0]).toContain('metric agentroom_redis_up has no label servise');
    expect(check([of('sum by (operation) (agentroom_webhook_queue_depth)')], known)[0]).toContain('label operation (by/on) is carried by none of');
    expect(() => promqlReferences('sum(rate(agentroom_redis_up[5m])')).toThrow(/not PromQL/);
    // A histogram's series and its `le`, and a target label, are known.
    expect(check([of('histogram_quantile(0.9, sum by (le, job) (rate(agentroom_live_fanout_seconds_bucket{pod=~".+"}[5m])))')], known)).toEqual([]);
  });
});
