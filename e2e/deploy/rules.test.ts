import { execFile } from 'node:child_process';
import { copyFile, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type OperationName, OPERATIONS } from '@agentroom/api';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { goTool } from '../support/go-tools.js';

/**
 * The chart's PrometheusRule (docs/observability.md, "Alerts and runbooks"; docs/decisions.md §51):
 * rendered by the real helm, its groups checked by the real `promtool check rules`, and its alerts
 * exercised by `promtool test rules` with the unit tests of e2e/fixtures/rules/, in which each alert
 * fires on the series that should fire it and stays quiet on healthy ones; every alert links a
 * runbook page of docs/runbooks/. helm lint and kubectl-validate (with the Prometheus Operator's
 * CRDs) check it in e2e/deploy/chart.test.ts, whose external-url combination turns it on.
 */
const root = fileURLToPath(new URL('../../', import.meta.url));
const chart = join(root, 'charts/agent-room');
const fixtures = join(root, 'e2e/fixtures/rules');
const runbooks = join(root, 'docs/runbooks');
// The release the fixtures' series belong to.
const RELEASE = 'room';
const NAMESPACE = 'agent-room';
const RUNBOOK_BASE = 'https://git.example.com/agent-room/blob/main/docs/runbooks';
const ON = { prometheusRules: { enabled: true, runbookBaseUrl: RUNBOOK_BASE }, serviceMonitor: { enabled: true } };
/** The promtool unit-test files of e2e/fixtures/rules/. */
const UNIT_TESTS = ['causes.test.yaml', 'slo-availability.test.yaml', 'slo-latency.test.yaml'];

const run = promisify(execFile);

const rule = z.union([
  z.object({ record: z.string(), expr: z.string(), labels: z.record(z.string(), z.string()).optional() }),
  z.object({
    alert: z.string(),
    expr: z.string(),
    for: z.string().optional(),
    labels: z.record(z.string(), z.string()),
    annotations: z.object({ summary: z.string().min(1), description: z.string().min(1), runbook_url: z.string() }),
  }),
]);
type Rule = z.output<typeof rule>;
type AlertRule = Extract<Rule, { alert: string }>;
const group = z.object({ name: z.string(), rules: z.array(rule) });
type Group = z.output<typeof group>;
const renderedObject = z.looseObject({ kind: z.string(), metadata: z.looseObject({ name: z.string(), labels: z.record(z.string(), z.string()) }) });
const prometheusRule = renderedObject.extend({ spec: z.object({ groups: z.array(group) }) });

/** A promtool unit-test file, read for what it expects. */
const unitTests = z.object({
  tests: z.array(
    z.object({
      name: z.string(),
      alert_rule_test: z.array(
        z.object({
          alertname: z.string(),
          exp_alerts: z.array(z.object({ exp_labels: z.record(z.string(), z.string()), exp_annotations: z.object({ runbook_url: z.string() }).loose() })),
        }),
      ),
    }),
  ),
});

let work: string;

/** `helm template` with values; the objects it rendered. */
async function render(values: Record<string, unknown>): Promise<z.output<typeof renderedObject>[]> {
  const file = join(work, `values-${Math.random().toString(36).slice(2)}.json`);
  await writeFile(file, JSON.stringify(values));
  const { stdout } = await run(goTool('helm'), ['template', RELEASE, chart, '--namespace', NAMESPACE, '--values', file], { maxBuffer: 64 << 20 });
  return parseAllDocuments(stdout)
    .map((doc) => doc.toJS() as unknown)
    .filter((value) => value !== null)
    .map((value) => renderedObject.parse(value));
}

/** The groups of the one PrometheusRule rendered with values. */
async function groupsWith(values: Record<string, unknown>): Promise<Group[]> {
  const found = (await render(values)).filter((o) => o.kind === 'PrometheusRule');
  expect(found).toHaveLength(1);
  return prometheusRule.parse(found[0]).spec.groups;
}

function alertsOf(groups: Group[]): AlertRule[] {
  return groups.flatMap((g) => g.rules).filter((r): r is AlertRule => 'alert' in r);
}

let groups: Group[];
let testFiles: string[];

beforeAll(async () => {
  goTool('helm');
  goTool('promtool');
  work = await mkdtemp(join(tmpdir(), 'agentroom-rules-'));
  groups = await groupsWith(ON);
  // The rules as Prometheus loads them, beside the unit tests that name them as rules.yaml.
  await writeFile(join(work, 'rules.yaml'), stringify({ groups }));
  testFiles = (await readdir(fixtures)).filter((name) => name.endsWith('.test.yaml')).sort();
  await Promise.all(testFiles.map((name) => copyFile(join(fixtures, name), join(work, name))));
});

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

describe('the PrometheusRule, checked and unit-tested by promtool', () => {
  it('promtool check rules accepts every recording and alerting rule', async () => {
    const { stdout } = await run(goTool('promtool'), ['check', 'rules', join(work, 'rules.yaml')]);
    expect(stdout).toMatch(/SUCCESS: \d+ rules found/);
  });

  it('the unit-test files of e2e/fixtures/rules are the ones run below', () => {
    expect(testFiles).toEqual(UNIT_TESTS);
  });

  it.concurrent.each(UNIT_TESTS)('promtool test rules %s passes', async (name) => {
    const result = await run(goTool('promtool'), ['test', 'rules', join(work, name)]).catch((error: { stdout?: string; stderr?: string }) => ({
      stdout: `${error.stdout ?? ''}${error.stderr ?? String(error)}`,
    }));
    expect(result.stdout).toContain('SUCCESS');
    expect(result.stdout).not.toContain('FAILED');
  });

  it('each alert, at each of its severities, fires in a unit test with its labels and runbook_url asserted, and stays quiet in another', async () => {
    const fired = new Set<string>();
    const quiet = new Set<string>();
    for (const name of testFiles) {
      for (const test of unitTests.parse(parse(await readFile(join(fixtures, name), 'utf8'))).tests) {
        for (const check of test.alert_rule_test) {
          if (check.exp_alerts.length === 0) quiet.add(check.alertname);
          for (const expected of check.exp_alerts) {
            fired.add(`${check.alertname} ${expected.exp_labels.severity ?? '(no severity)'}`);
            expect(expected.exp_annotations.runbook_url, `${name}: ${test.name}`).toBe(`${RUNBOOK_BASE}/${check.alertname}.md`);
          }
        }
      }
    }
    const alerts = alertsOf(groups);
    expect([...fired].sort()).toEqual([...new Set(alerts.map((a) => `${a.alert} ${a.labels.severity}`))].sort());
    expect([...quiet].sort()).toEqual([...new Set(alerts.map((a) => a.alert))].sort());
  });
});

describe('alerts and their runbooks', () => {
  it('every alert pages or opens a ticket and links its page of docs/runbooks/, which the runbooks index lists; every page is an alert', async () => {
    const alerts = alertsOf(groups);
    const names = [...new Set(alerts.map((a) => a.alert))].sort();
    expect(names).toEqual([
      'AgentRoomAvailabilityBudgetBurn',
      'AgentRoomPodRestartLoop',
      'AgentRoomReadLatencyBudgetBurn',
      'AgentRoomRedisUnreachable',
      'AgentRoomWebhookDeliveryLate',
      'AgentRoomWorkloadUnavailable',
      'AgentRoomWriteLatencyBudgetBurn',
    ]);
    for (const alert of alerts) {
      expect(['page', 'ticket'], alert.alert).toContain(alert.labels.severity);
      expect(alert.annotations.runbook_url).toBe(`${RUNBOOK_BASE}/${alert.alert}.md`);
    }
    const pages = (await readdir(runbooks)).filter((name) => name.endsWith('.md') && name !== 'README.md');
    expect(pages.sort()).toEqual(names.map((name) => `${name}.md`));
    const index = await readFile(join(runbooks, 'README.md'), 'utf8');
    for (const name of names) expect(index).toContain(`](${name}.md)`);
  });

  it('the alerts read the series as the chart scrapes them: job is the Service component (edge, delivery), namespace the release', async () => {
    const objects = await render(ON);
    const monitor = z.looseObject({ spec: z.looseObject({ jobLabel: z.string() }) }).parse(objects.find((o) => o.kind === 'ServiceMonitor'));
    expect(monitor.spec.jobLabel).toBe('app.kubernetes.io/component');
    const scraped = objects.filter((o) => o.kind === 'Service' && o.metadata.labels['agent-room.dev/metrics'] === 'true');
    const jobs = scraped.map((s) => s.metadata.labels['app.kubernetes.io/component']);
    expect(jobs).toEqual(expect.arrayContaining(['edge', 'delivery']));
    const selectors = groups.flatMap((g) => g.rules).map((r) => r.expr);
    expect(selectors.filter((expr) => expr.includes('agentroom_')).every((expr) => expr.includes(`namespace="${NAMESPACE}"`))).toBe(true);
  });

  it('off by default; refused without runbookBaseUrl, or with alert labels that would replace the severity', async () => {
    expect((await render({})).filter((o) => o.kind === 'PrometheusRule')).toEqual([]);
    const refused = await render({ prometheusRules: { enabled: true } }).then(
      () => '',
      (error: { stderr?: string }) => error.stderr ?? String(error),
    );
    expect(refused).toContain('prometheusRules.runbookBaseUrl is required');
    // The severity is the chart's to set: Alertmanager's routes depend on page and ticket.
    const overridden = await render({ prometheusRules: { ...ON.prometheusRules, alertLabels: { severity: 'critical' } } }).then(
      () => '',
      (error: { stderr?: string }) => error.stderr ?? String(error),
    );
    expect(overridden).toContain('/prometheusRules/alertLabels');
  });
});

describe('SLOs as intent', () => {
  const budgetOf = (alert: AlertRule): string[] => [...alert.expr.matchAll(/> \(([\d.]+) \* ([\d.e-]+)\)/g)].map((m) => `${m[1]}×${m[2]}`);

  it('each SLO of values.yaml gets its error ratios over 5m to 3d and the SRE workbook burn-rate alerts: page at 14.4× (1h, 5m) or 6× (6h, 30m), ticket at 3× (1d, 2h) or 1× (3d, 6h)', () => {
    for (const slo of ['availability', 'read-latency', 'write-latency']) {
      const sli = groups.find((g) => g.name === `room-agent-room-slo-sli-recordings-${slo}`);
      expect(sli?.rules.map((r) => ('record' in r ? r.record : r.alert))).toEqual(
        ['5m', '30m', '1h', '2h', '6h', '1d', '3d', '30d'].map((window) => `slo:sli_error:ratio_rate${window}`),
      );
      const [page, ticket] = alertsOf(groups.filter((g) => g.name === `room-agent-room-slo-alerts-${slo}`));
      const budget = slo === 'availability' ? '0.001' : '0.01';
      expect(page?.labels.severity).toBe('page');
      expect(page?.for).toBe('5m');
      expect(budgetOf(page!)).toEqual([`14.4×${budget}`, `14.4×${budget}`, `6×${budget}`, `6×${budget}`]);
      expect(page?.expr).toMatch(/ratio_rate1h\{.*\n.*\n.*ratio_rate5m\{[\s\S]*ratio_rate6h\{.*\n.*\n.*ratio_rate30m\{/);
      expect(ticket?.labels.severity).toBe('ticket');
      expect(ticket?.for).toBe('10m');
      expect(budgetOf(ticket!)).toEqual([`3×${budget}`, `3×${budget}`, `1×${budget}`, `1×${budget}`]);
      expect(ticket?.expr).toMatch(/ratio_rate1d\{.*\n.*\n.*ratio_rate2h\{[\s\S]*ratio_rate3d\{.*\n.*\n.*ratio_rate6h\{/);
    }
  });

  it('an SRE changes an objective, or adds an SLO, in values alone: the thresholds and alerts follow', async () => {
    const changed = await groupsWith({
      ...ON,
      prometheusRules: {
        ...ON.prometheusRules,
        alertLabels: { team: 'room' },
        slos: {
          // Merged into the defaults: the availability SLO keeps its queries.
          availability: { objective: 99.5 },
          searchLatency: {
            objective: 95,
            description: 'searches answered within 1 s',
            errorQuery:
              'sum(rate(agentroom_operation_duration_seconds_count{namespace="{{.namespace}}",job="edge",operation="searchPosts"}[{{.window}}])) - sum(rate(agentroom_operation_duration_seconds_bucket{namespace="{{.namespace}}",job="edge",operation="searchPosts",le="1"}[{{.window}}]))',
            totalQuery: 'sum(rate(agentroom_operation_duration_seconds_count{namespace="{{.namespace}}",job="edge",operation="searchPosts"}[{{.window}}]))',
          },
        },
      },
    });
    const alerts = alertsOf(changed);
    const availability = alerts.filter((a) => a.alert === 'AgentRoomAvailabilityBudgetBurn');
    expect(availability.map(budgetOf)).toEqual([
      ['14.4×0.005', '14.4×0.005', '6×0.005', '6×0.005'],
      ['3×0.005', '3×0.005', '1×0.005', '1×0.005'],
    ]);
    const search = alerts.filter((a) => a.alert === 'AgentRoomSearchLatencyBudgetBurn');
    expect(search.map((a) => a.labels)).toEqual([
      { severity: 'page', team: 'room' },
      { severity: 'ticket', team: 'room' },
    ]);
    expect(search.map(budgetOf)[0]).toEqual(['14.4×0.05', '14.4×0.05', '6×0.05', '6×0.05']);
    const windowed = changed.find((g) => g.name === 'room-agent-room-slo-sli-recordings-search-latency')?.rules[2];
    expect(windowed?.expr).toContain('operation="searchPosts",le="1"}[1h]');
    expect(windowed?.expr).toContain(`namespace="${NAMESPACE}"`);
    expect(alerts.every((a) => a.labels.team === 'room')).toBe(true);
  });

  it('the latency SLOs cover every operation of the API: reads are those that change nothing, writes the others', async () => {
    const values = z
      .object({
        prometheusRules: z.object({
          slos: z.record(z.string(), z.object({ errorQuery: z.string(), totalQuery: z.string() })),
        }),
      })
      .parse(parse(await readFile(join(chart, 'values.yaml'), 'utf8')));
    const operationsOf = (query: string): string[] => {
      const lists = [...query.matchAll(/operation=~"([^"]+)"/g)].map((m) => m[1]!.split('|').sort());
      expect(lists.length).toBeGreaterThan(0);
      // Every selector of the query names the same operations.
      for (const list of lists) expect(list).toEqual(lists[0]);
      return lists[0]!;
    };
    const names = Object.keys(OPERATIONS) as OperationName[];
    const reads = names.filter((name) => !OPERATIONS[name].writes).sort();
    const writes = names.filter((name) => OPERATIONS[name].writes).sort();
    const { readLatency, writeLatency } = values.prometheusRules.slos;
    expect(operationsOf(readLatency!.errorQuery)).toEqual(reads);
    expect(operationsOf(readLatency!.totalQuery)).toEqual(reads);
    expect(operationsOf(writeLatency!.errorQuery)).toEqual(writes);
    expect(operationsOf(writeLatency!.totalQuery)).toEqual(writes);
    // The thresholds are bounds of the operations histogram's buckets (services/kit/src/metrics.ts).
    expect(readLatency!.errorQuery).toContain('le="0.25"');
    expect(writeLatency!.errorQuery).toContain('le="0.5"');
  });

  it('with Redis and PostgreSQL of your own, only the Deployments are watched for ready replicas', async () => {
    const external = await groupsWith({
      ...ON,
      redis: { external: { url: 'redis://redis.example.com:6379' } },
      postgresql: { external: { url: 'postgres://room:s3cret@db.example.com:5432/room' } },
    });
    const unavailable = alertsOf(external).find((a) => a.alert === 'AgentRoomWorkloadUnavailable');
    expect(unavailable?.expr).toContain('kube_deployment_status_replicas_available');
    expect(unavailable?.expr).not.toContain('statefulset');
    expect(alertsOf(groups).find((a) => a.alert === 'AgentRoomWorkloadUnavailable')?.expr).toContain('statefulset=~"room-agent-room-(redis|postgresql)"');
  });
});
