import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { goTool } from '../support/go-tools.js';

/**
 * The chart's Grafana dashboards (files/dashboards/*.json, `dashboards.enabled`): rendered only when
 * asked, one ConfigMap per dashboard with the sidecar's label, each a dashboard Grafana accepts,
 * through the real helm and kubectl-validate. That each reads metrics that exist is
 * e2e/cluster/metrics-exist.test.ts's.
 */
const root = fileURLToPath(new URL('../../', import.meta.url));
const chart = join(root, 'charts/agent-room');
const dashboardsDir = join(chart, 'files/dashboards');
const RELEASE = 'room';
const NAMESPACE = 'agent-room';
const run = promisify(execFile);

const configMap = z.object({
  apiVersion: z.literal('v1'),
  kind: z.literal('ConfigMap'),
  metadata: z.object({
    name: z.string(),
    namespace: z.string(),
    labels: z.record(z.string(), z.string()),
    annotations: z.record(z.string(), z.string()).optional(),
  }),
  data: z.record(z.string(), z.string()),
});

const datasourceRef = z.object({ type: z.literal('prometheus'), uid: z.literal('${datasource}') });
const gridPos = z.object({ x: z.number().int().min(0), y: z.number().int().min(0), w: z.number().int().min(1).max(24), h: z.number().int().min(1) });
const panel = z.looseObject({
  id: z.number().int(),
  type: z.string(),
  title: z.string().min(1),
  gridPos,
  datasource: datasourceRef.optional(),
  targets: z.array(z.looseObject({ expr: z.string().min(1), refId: z.string(), datasource: datasourceRef })).optional(),
});
const dashboard = z.looseObject({
  uid: z.string().regex(/^[a-zA-Z0-9_-]{1,40}$/),
  title: z.string().min(1),
  schemaVersion: z.number().int().min(36),
  panels: z.array(panel).min(1),
  templating: z.object({ list: z.array(z.looseObject({ name: z.string(), type: z.string(), query: z.unknown().optional() })) }),
});

const files = (await readdir(dashboardsDir)).filter((name) => name.endsWith('.json')).sort();
let work: string;

/** `helm template` with `values`: the objects rendered, and the folder holding them (for kubectl-validate). */
async function render(name: string, values: Record<string, unknown>): Promise<{ objects: unknown[]; dir: string }> {
  const dir = join(work, name);
  await mkdir(dir, { recursive: true });
  const valuesFile = join(dir, 'values.json');
  await writeFile(valuesFile, JSON.stringify(values));
  const out = join(dir, 'manifests');
  await run(goTool('helm'), ['template', RELEASE, chart, '--namespace', NAMESPACE, '--values', valuesFile, '--output-dir', out]);
  const objects: unknown[] = [];
  for (const file of (await readdir(out, { recursive: true, withFileTypes: true })).filter((e) => e.isFile() && e.name.endsWith('.yaml')))
    for (const doc of parseAllDocuments(await readFile(join(file.parentPath, file.name), 'utf8'))) if (doc.contents !== null) objects.push(doc.toJS());
  return { objects, dir: out };
}

const isDashboardMap = (o: unknown): boolean =>
  (o as { kind?: string }).kind === 'ConfigMap' &&
  (o as { metadata?: { labels?: Record<string, string> } }).metadata?.labels?.['app.kubernetes.io/component'] === 'dashboards';

const ON = { dashboards: { enabled: true, annotations: { grafana_folder: 'Agent Room' } } };

beforeAll(async () => {
  goTool('helm');
  goTool('kubectl-validate');
  work = await mkdtemp(join(tmpdir(), 'agentroom-dashboards-'));
});

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

describe('the Grafana dashboards in the chart', () => {
  it('ships a dashboard per concern', () => {
    expect(files).toEqual(['delivery.json', 'live.json', 'record.json', 'redis.json', 'room.json', 'services.json', 'tokens.json']);
  });

  it('renders nothing of them by default', async () => {
    const { objects } = await render('off', {});
    expect(objects.filter(isDashboardMap)).toEqual([]);
    expect(JSON.stringify(objects)).not.toContain('grafana_dashboard');
  });

  it("renders one ConfigMap per dashboard when on, with the sidecar's label and folder annotation, holding the file as it is", async () => {
    const { objects } = await render('on', ON);
    const maps = objects.filter(isDashboardMap).map((o) => configMap.parse(o));
    expect(maps.map((m) => m.metadata.name).sort()).toEqual(files.map((file) => `room-agent-room-dashboard-${file.replace('.json', '')}`));
    for (const map of maps) {
      const name = map.metadata.name.replace('room-agent-room-dashboard-', '');
      expect(map.metadata.namespace).toBe(NAMESPACE);
      expect(map.metadata.labels).toMatchObject({ grafana_dashboard: '1', 'app.kubernetes.io/part-of': 'agent-room' });
      expect(map.metadata.annotations).toEqual({ grafana_folder: 'Agent Room' });
      // One key per dashboard, named apart: the sidecar writes every key into one folder.
      expect(Object.keys(map.data)).toEqual([`agent-room-${name}.json`]);
      expect(JSON.parse(map.data[`agent-room-${name}.json`]!)).toEqual(JSON.parse(await readFile(join(dashboardsDir, `${name}.json`), 'utf8')));
    }
  });

  it('takes its labels, annotations and namespace from the values', async () => {
    const { objects } = await render('own', { dashboards: { enabled: true, namespace: 'monitoring', labels: { grafana_dashboard: null, team: 'sre' } } });
    const maps = objects.filter(isDashboardMap).map((o) => configMap.parse(o));
    expect(maps).toHaveLength(files.length);
    for (const map of maps) {
      expect(map.metadata.namespace).toBe('monitoring');
      expect(map.metadata.labels.team).toBe('sre');
      expect(map.metadata.labels.grafana_dashboard).toBeUndefined();
      expect(map.metadata.annotations).toBeUndefined();
    }
  });

  it('each file is a dashboard with its own uid, a datasource variable every query uses, namespace and job variables, and panels laid out without overlap', async () => {
    const uids = new Set<string>();
    for (const file of files) {
      const board = dashboard.parse(JSON.parse(await readFile(join(dashboardsDir, file), 'utf8')));
      expect(uids.has(board.uid), `${file}: uid ${board.uid} is another dashboard's`).toBe(false);
      uids.add(board.uid);
      const variables = new Map(board.templating.list.map((v) => [v.name, v]));
      expect(variables.get('datasource'), file).toMatchObject({ type: 'datasource', query: 'prometheus' });
      expect(variables.get('namespace'), file).toMatchObject({ type: 'query', includeAll: true, allValue: '.*' });
      expect(new Set(board.panels.map((p) => p.id)).size, `${file}: panel ids`).toBe(board.panels.length);
      const cells = new Set<string>();
      for (const p of board.panels) {
        if (p.type !== 'row') expect(p.targets?.length, `${file}: ${p.title} has no query`).toBeGreaterThan(0);
        for (const target of p.targets ?? []) expect(target.expr, `${file}: ${p.title}`).toContain('namespace=~"$namespace"');
        expect(p.gridPos.x + p.gridPos.w, `${file}: ${p.title}`).toBeLessThanOrEqual(24);
        for (let x = p.gridPos.x; x < p.gridPos.x + p.gridPos.w; x += 1)
          for (let y = p.gridPos.y; y < p.gridPos.y + p.gridPos.h; y += 1) {
            expect(cells.has(`${x},${y}`), `${file}: ${p.title} overlaps another panel at ${x},${y}`).toBe(false);
            cells.add(`${x},${y}`);
          }
      }
    }
  });

  it("names as job only the services the chart's ServiceMonitor scrapes (its job label is the component's name)", async () => {
    const { objects } = await render('scraped', { serviceMonitor: { enabled: true } });
    const scraped = new Set(
      objects
        .map((o) => o as { kind?: string; metadata?: { labels?: Record<string, string> } })
        .filter((o) => o.kind === 'Service' && o.metadata?.labels?.['agent-room.dev/metrics'] === 'true')
        .map((o) => o.metadata?.labels?.['app.kubernetes.io/component']),
    );
    expect(scraped.size).toBe(6);
    const named = new Set<string>();
    for (const file of files)
      for (const match of (await readFile(join(dashboardsDir, file), 'utf8')).matchAll(/job=\\"([^\\"]+)\\"/g)) named.add(match[1] ?? '');
    expect(named.size).toBeGreaterThan(0);
    for (const job of named) expect(scraped, `job="${job}"`).toContain(job);
  });

  it('passes helm lint --strict and kubectl-validate when on', async () => {
    const { dir } = await render('validate', ON);
    const { stdout } = await run(goTool('helm'), ['lint', '--strict', chart, '--namespace', NAMESPACE, '--values', join(work, 'validate', 'values.json')]);
    expect(stdout).toContain('0 chart(s) failed');
    for (const version of ['1.30', '1.35']) {
      const result = await run(goTool('kubectl-validate'), [dir, '--version', version, '--output', 'json']).catch((error: { stdout?: string }) => ({
        stdout: error.stdout ?? String(error),
      }));
      const report = z.record(z.string(), z.array(z.looseObject({ status: z.string(), message: z.string().optional() }))).parse(JSON.parse(result.stdout));
      const dashboardsChecked = Object.entries(report).filter(([file]) => file.endsWith('dashboards.yaml'));
      expect(dashboardsChecked.flatMap(([, results]) => results)).toHaveLength(files.length);
      expect(Object.values(report).flatMap((results) => results.filter((r) => r.status !== 'Success').map((r) => r.message))).toEqual([]);
    }
  });
});
