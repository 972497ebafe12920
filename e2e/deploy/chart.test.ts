import { execFile } from 'node:child_process';
import { appendFile, cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { authEnv } from '@agentroom/auth';
import { deliveryEnv } from '@agentroom/delivery';
import { edgeEnv } from '@agentroom/edge';
import { CHART_ENVOY_TRACING_FILE, envoyTracing, fillChartPlaceholders, tracingEnv } from '@agentroom/gateway/envoy';
import { messagingEnv } from '@agentroom/messaging';
import { recordEnv } from '@agentroom/record';
import { roomEnv } from '@agentroom/room';
import { parse, parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { goTool, prometheusOperatorCrds } from '../support/go-tools.js';

/**
 * The Helm chart as an SRE meets it: `helm lint --strict` and `helm template` with every values
 * combination that changes what is rendered, every manifest checked by kubectl-validate against
 * the schemas of Kubernetes 1.30 to 1.35, each service's environment checked by that service's
 * own zod schema, and the behaviour people depend on (which objects exist, who may call whom,
 * what rolls on an upgrade). Real helm and kubectl-validate, built by scripts/install-tools.sh;
 * the ServiceMonitor and PrometheusRule against the Prometheus Operator's own CRDs.
 */
const root = fileURLToPath(new URL('../../', import.meta.url));
const chart = join(root, 'charts/agent-room');
const RELEASE = 'room';
const NAMESPACE = 'agent-room';
const FULLNAME = 'room-agent-room';
const KUBERNETES_VERSIONS = ['1.30', '1.31', '1.32', '1.33', '1.34', '1.35'];

const run = promisify(execFile);

// ---------------------------------------------------------------------------------------------
// The rendered objects, read through schemas of just the fields the checks look at.

const stringMap = z.record(z.string(), z.string());
const metadata = z.looseObject({ name: z.string(), namespace: z.string().optional(), labels: stringMap.default({}), annotations: stringMap.default({}) });
const object = z.looseObject({ apiVersion: z.string(), kind: z.string(), metadata });
const envVar = z.object({
  name: z.string(),
  value: z.string().optional(),
  valueFrom: z.looseObject({ secretKeyRef: z.object({ name: z.string(), key: z.string() }).optional() }).optional(),
});
const portRef = z.union([z.string(), z.number()]);
const probe = z.looseObject({
  grpc: z.object({ port: z.number() }).optional(),
  httpGet: z.looseObject({ path: z.string(), port: portRef }).optional(),
  tcpSocket: z.looseObject({ port: portRef }).optional(),
  exec: z.object({ command: z.array(z.string()) }).optional(),
});
const securityContext = z.looseObject({
  runAsNonRoot: z.boolean().optional(),
  runAsUser: z.number().optional(),
  readOnlyRootFilesystem: z.boolean().optional(),
  allowPrivilegeEscalation: z.boolean().optional(),
  capabilities: z.looseObject({ drop: z.array(z.string()).optional() }).optional(),
  seccompProfile: z.looseObject({ type: z.string() }).optional(),
});
const container = z.looseObject({
  name: z.string(),
  image: z.string(),
  command: z.array(z.string()).optional(),
  args: z.array(z.string()).default([]),
  env: z.array(envVar).default([]),
  ports: z.array(z.looseObject({ name: z.string(), containerPort: z.number() })).default([]),
  startupProbe: probe.optional(),
  readinessProbe: probe.optional(),
  livenessProbe: probe.optional(),
  lifecycle: z.looseObject({ preStop: z.looseObject({ sleep: z.object({ seconds: z.number() }).optional() }).optional() }).optional(),
  securityContext: securityContext.optional(),
  volumeMounts: z.array(z.looseObject({ name: z.string(), mountPath: z.string(), readOnly: z.boolean().optional() })).default([]),
});
type Container = z.output<typeof container>;
const podSpec = z.looseObject({
  containers: z.array(container),
  initContainers: z.array(container).default([]),
  securityContext: securityContext.optional(),
  terminationGracePeriodSeconds: z.number().optional(),
  volumes: z
    .array(z.looseObject({ name: z.string(), emptyDir: z.looseObject({}).optional(), configMap: z.looseObject({ name: z.string() }).optional() }))
    .default([]),
});
const podTemplate = z.object({ metadata: z.looseObject({ labels: stringMap.default({}), annotations: stringMap.default({}) }), spec: podSpec });
const workload = object.extend({
  spec: z.looseObject({ replicas: z.number().optional(), template: podTemplate, volumeClaimTemplates: z.array(z.unknown()).optional() }),
});
type Workload = z.output<typeof workload>;
const service = object.extend({
  spec: z.looseObject({
    type: z.string().optional(),
    clusterIP: z.string().optional(),
    selector: stringMap,
    ports: z.array(z.looseObject({ name: z.string(), port: z.number(), targetPort: portRef })),
  }),
});
type Service = z.output<typeof service>;
const secret = object.extend({ data: stringMap.default({}) });
const labelSelector = z.looseObject({ matchLabels: stringMap.optional() });
const policyPort = z.object({ port: portRef, protocol: z.string() });
const ipBlock = z.object({ cidr: z.string(), except: z.array(z.string()).optional() });
const networkPolicy = object.extend({
  spec: z.object({
    podSelector: labelSelector,
    policyTypes: z.array(z.string()),
    ingress: z
      .array(
        z.object({
          from: z.array(z.looseObject({ podSelector: labelSelector.optional(), namespaceSelector: labelSelector.optional() })).optional(),
          ports: z.array(policyPort),
        }),
      )
      .default([]),
    egress: z
      .array(
        z.object({
          to: z.array(z.object({ podSelector: labelSelector.optional(), ipBlock: ipBlock.optional() })).optional(),
          ports: z.array(policyPort),
        }),
      )
      .default([]),
  }),
});
const hpa = object.extend({
  spec: z.looseObject({
    scaleTargetRef: z.object({ kind: z.string(), name: z.string(), apiVersion: z.string() }),
    minReplicas: z.number(),
    maxReplicas: z.number(),
  }),
});
const ingress = object.extend({
  spec: z.looseObject({
    rules: z.array(
      z.object({
        host: z.string(),
        http: z.object({
          paths: z.array(
            z.object({
              path: z.string(),
              pathType: z.string(),
              backend: z.object({ service: z.object({ name: z.string(), port: z.object({ name: z.string() }) }) }),
            }),
          ),
        }),
      }),
    ),
  }),
});
const serviceMonitor = object.extend({
  spec: z.looseObject({
    selector: labelSelector,
    namespaceSelector: z.object({ matchNames: z.array(z.string()) }),
    endpoints: z.array(z.looseObject({ port: z.string(), path: z.string() })),
  }),
});
const configMap = object.extend({ data: stringMap });

const COMPONENT = 'app.kubernetes.io/component';

/** What one `helm template` rendered. */
class Rendered {
  private byComponent: Map<string, Workload> | undefined;
  private admitted: string[] | undefined;

  constructor(
    readonly objects: z.output<typeof object>[],
    readonly dir: string,
  ) {}

  all(kind: string): z.output<typeof object>[] {
    return this.objects.filter((o) => o.kind === kind);
  }

  find(kind: string, name: string): unknown {
    return this.objects.find((o) => o.kind === kind && o.metadata.name === name);
  }

  get<S extends z.ZodType>(schema: S, kind: string, name: string): z.output<S> {
    const found = this.find(kind, name);
    if (found === undefined) throw new Error(`no ${kind} ${name} among ${this.objects.map((o) => `${o.kind}/${o.metadata.name}`).join(', ')}`);
    return schema.parse(found);
  }

  deployment(component: string): Workload {
    return this.get(workload, 'Deployment', `${FULLNAME}-${component}`);
  }

  services(): Service[] {
    return this.all('Service').map((o) => service.parse(o));
  }

  /** Deployments and StatefulSets by the component label of their pods. */
  workloads(): Map<string, Workload> {
    if (this.byComponent) return this.byComponent;
    const found = new Map<string, Workload>();
    for (const o of [...this.all('Deployment'), ...this.all('StatefulSet')]) {
      const w = workload.parse(o);
      found.set(w.spec.template.metadata.labels[COMPONENT] ?? '?', w);
    }
    this.byComponent = found;
    return found;
  }

  /** The flows its NetworkPolicies admit (see flows()). */
  flows(): string[] {
    this.admitted ??= flows(this);
    return this.admitted;
  }

  /** A named or numbered container port of a component, as a number. */
  port(component: string, ref: string | number): number {
    if (typeof ref === 'number') return ref;
    const w = this.workloads().get(component);
    const port = w?.spec.template.spec.containers.flatMap((c) => c.ports).find((p) => p.name === ref);
    if (port === undefined) throw new Error(`${component} has no container port named ${ref}`);
    return port.containerPort;
  }

  /** The decoded value of a key of a Secret the chart rendered, if it rendered that Secret. */
  secretValue(name: string, key: string): string | undefined {
    const found = this.find('Secret', name);
    if (found === undefined) return undefined;
    const data = secret.parse(found).data[key];
    return data === undefined ? undefined : Buffer.from(data, 'base64').toString('utf8');
  }
}

// ---------------------------------------------------------------------------------------------
// The values combinations: every flag that changes what is rendered, on and off.

/** A Redis Cluster, the kind of external Redis most unlike the bundled one. */
const EXTERNAL_URL = 'redis+cluster://:s3cret@10.0.0.1:6379,10.0.0.2:6379';
/** An external PostgreSQL and its read replica, given as values. */
const EXTERNAL_DATABASE_URL = 'postgres://room:pg-primary-s3cret@db.example.com:5432/room?sslmode=require';
const EXTERNAL_DATABASE_READ_URL = 'postgres://room:pg-replica-s3cret@db-replica.example.com:5432/room?sslmode=require';

const COMBINATIONS: Record<string, Record<string, unknown>> = {
  /** Out of the box: bundled Redis and PostgreSQL, fixed replicas, no Ingress, NetworkPolicies, no ServiceMonitor. */
  defaults: {},
  /** External Redis (a cluster) and PostgreSQL (with a read replica) by URL, every HPA, Ingress with TLS, no NetworkPolicies, a ServiceMonitor and the PrometheusRule. */
  'external-url': {
    redis: { external: { url: EXTERNAL_URL }, waitReplicas: 1 },
    postgresql: { external: { url: EXTERNAL_DATABASE_URL, readUrl: EXTERNAL_DATABASE_READ_URL } },
    room: { autoscaling: { enabled: true } },
    record: { autoscaling: { enabled: true }, retentionDays: 365 },
    messaging: { autoscaling: { enabled: true } },
    delivery: { autoscaling: { enabled: true } },
    auth: { autoscaling: { enabled: true } },
    edge: { autoscaling: { enabled: true } },
    envoy: { autoscaling: { enabled: true } },
    ingress: { enabled: true, className: 'nginx', hosts: ['room.example.com'], tls: [{ secretName: 'room-tls', hosts: ['room.example.com'] }] },
    networkPolicy: { enabled: false },
    serviceMonitor: { enabled: true, labels: { release: 'kube-prometheus-stack' } },
    prometheusRules: {
      enabled: true,
      labels: { release: 'kube-prometheus-stack' },
      runbookBaseUrl: 'https://git.example.com/agent-room/blob/main/docs/runbooks',
    },
  },
  /** External Redis, PostgreSQL (with a read replica) and the cursor key from Secrets you manage, Ingress without TLS, a LoadBalancer, restricted Envoy callers. */
  'external-secret': {
    redis: { external: { existingSecret: 'my-redis', existingSecretKey: 'url' } },
    postgresql: { external: { existingSecret: 'my-postgres', existingSecretKey: 'url', existingSecretReadKey: 'read-url' } },
    secrets: { existingSecret: 'my-secrets' },
    edge: { autoscaling: { enabled: true, minReplicas: 3, maxReplicas: 12 } },
    ingress: { enabled: true, hosts: ['room.example.org'] },
    envoy: { service: { type: 'LoadBalancer', externalTrafficPolicy: 'Local', loadBalancerSourceRanges: ['10.0.0.0/8'] } },
    networkPolicy: { enabled: true, envoyFrom: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } }] },
    serviceMonitor: { enabled: true },
  },
  /** Bundled Redis and PostgreSQL with your own Secret, no PDBs, no NetworkPolicies, explicit addresses, overrides through extraEnv. */
  'bundled-own-secret': {
    secrets: { existingSecret: 'my-secrets' },
    publicUrls: { site: 'https://room.example.net/' },
    room: { pdb: { enabled: false }, replicas: 3, shutdownGraceMs: 30000 },
    messaging: { pdb: { enabled: false } },
    delivery: { pdb: { enabled: false }, replicas: 3 },
    record: { pdb: { enabled: false }, replicas: 3, extraEnv: [{ name: 'LOG_LEVEL', value: 'debug' }] },
    auth: { pdb: { enabled: false }, extraEnv: [{ name: 'PASSWORD_HASH_COST', value: '65536' }] },
    edge: {
      pdb: { enabled: false },
      replicas: 4,
      extraEnv: [
        { name: 'QUOTA_PER_TOKEN', value: '50000' },
        { name: 'LIVE_HEARTBEAT_MS', value: '20000' },
      ],
    },
    envoy: { pdb: { enabled: false }, service: { type: 'NodePort' } },
    networkPolicy: { enabled: false },
    image: { repository: 'registry.example.com/agent-room', tag: '1.2.3', pullSecrets: ['registry'] },
  },
  /** Traces from Envoy and every service to a collector in another namespace, a quarter of requests, with NetworkPolicies. */
  tracing: {
    tracing: {
      enabled: true,
      otlpEndpoint: 'http://otel-collector.observability.svc:4318/',
      sampling: 0.25,
      resourceAttributes: { 'deployment.environment.name': 'staging' },
    },
  },
};

let work: string;
/** The Prometheus Operator's CRDs, for kubectl-validate. */
let crds: string;
const rendered = new Map<string, Rendered>();

async function readObjects(dir: string): Promise<z.output<typeof object>[]> {
  const files = (await readdir(dir, { recursive: true, withFileTypes: true })).filter((e) => e.isFile() && e.name.endsWith('.yaml'));
  const objects: z.output<typeof object>[] = [];
  for (const file of files) {
    for (const doc of parseAllDocuments(await readFile(join(file.parentPath, file.name), 'utf8'))) {
      if (doc.errors.length > 0) throw new Error(`${file.name}: ${doc.errors.join('; ')}`);
      const value: unknown = doc.toJS();
      if (value !== null) objects.push(object.parse(value));
    }
  }
  return objects;
}

/** `helm template` of a chart with values into a folder of its own; the objects it rendered. */
async function render(name: string, values: Record<string, unknown>, chartDir = chart): Promise<Rendered> {
  const dir = join(work, name);
  await mkdir(dir, { recursive: true });
  const valuesFile = join(dir, 'values.json');
  await writeFile(valuesFile, JSON.stringify(values));
  const out = join(dir, 'manifests');
  await run(goTool('helm'), ['template', RELEASE, chartDir, '--namespace', NAMESPACE, '--values', valuesFile, '--output-dir', out]);
  return new Rendered(await readObjects(out), out);
}

/** `helm template` that must fail; its error output. */
async function renderFails(args: string[]): Promise<string> {
  try {
    await run(goTool('helm'), ['template', RELEASE, chart, '--namespace', NAMESPACE, ...args]);
  } catch (error) {
    return String((error as { stderr?: unknown }).stderr ?? error);
  }
  throw new Error(`helm template ${args.join(' ')} succeeded`);
}

function of(name: string): Rendered {
  const r = rendered.get(name);
  if (r === undefined) throw new Error(`${name} was not rendered`);
  return r;
}

beforeAll(async () => {
  goTool('helm');
  goTool('kubectl-validate');
  crds = prometheusOperatorCrds();
  work = await mkdtemp(join(tmpdir(), 'agentroom-chart-'));
  await Promise.all(Object.entries(COMBINATIONS).map(async ([name, values]) => rendered.set(name, await render(name, values))));
});

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------

describe('helm lint and kubectl-validate', () => {
  it.concurrent.each(Object.keys(COMBINATIONS))('helm lint --strict passes with %s', async (name) => {
    const { stdout } = await run(goTool('helm'), ['lint', '--strict', chart, '--namespace', NAMESPACE, '--values', join(work, name, 'values.json')]);
    expect(stdout).toContain('0 chart(s) failed');
  });

  it.concurrent.each(KUBERNETES_VERSIONS)('every manifest of every combination is valid for Kubernetes %s', async (version) => {
    const dirs = Object.keys(COMBINATIONS).map((name) => of(name).dir);
    const result = await run(goTool('kubectl-validate'), [...dirs, '--version', version, '--local-crds', crds, '--output', 'json']).catch(
      (error: { stdout?: string }) => ({ stdout: error.stdout ?? String(error) }),
    );
    const report = z.record(z.string(), z.array(z.looseObject({ status: z.string(), message: z.string().optional() }))).parse(JSON.parse(result.stdout));
    const failures = Object.entries(report).flatMap(([file, results]) =>
      results.filter((r) => r.status !== 'Success').map((r) => `${file.replace(work, '')}: ${r.message}`),
    );
    expect(failures).toEqual([]);
    // Every object was looked at, the ServiceMonitor and PrometheusRule included.
    const checked = Object.values(report).reduce((n, results) => n + results.length, 0);
    expect(checked).toBe([...rendered.values()].reduce((n, r) => n + r.objects.length, 0));
  });

  it('values that cannot work are refused before anything is rendered: a misspelt key, a number as an environment value, a non-Redis URL, two Redis sources, an HPA whose minimum is above its maximum', async () => {
    expect(await renderFails(['--set', 'edge.replica=3'])).toContain("additional properties 'replica' not allowed");
    expect(await renderFails(['--set', 'edge.extraEnv[0].name=LIVE_HEARTBEAT_MS', '--set', 'edge.extraEnv[0].value=20000'])).toContain(
      '/edge/extraEnv/0/value',
    );
    expect(await renderFails(['--set', 'redis.external.url=http://redis:6379'])).toContain('/redis/external/url');
    expect(await renderFails(['--set', 'redis.external.url=redis://r:6379', '--set', 'redis.external.existingSecret=r'])).toContain('not both');
    expect(
      await renderFails(['--set', 'edge.autoscaling.enabled=true', '--set', 'edge.autoscaling.minReplicas=5', '--set', 'edge.autoscaling.maxReplicas=3']),
    ).toContain('minReplicas (5) is above maxReplicas (3)');
    expect(await renderFails(['--set', 'delivery.egress.internet.enabled=sometimes'])).toContain('/delivery/egress/internet/enabled');
    expect(await renderFails(['--set', 'delivery.egress.externalRedisPorts={0}'])).toContain('/delivery/egress/externalRedisPorts/0');
    // Envoy routes the site at / and the API at /api of one origin: another layout would send requests astray.
    expect(await renderFails(['--set', 'publicUrls.site=https://example.com/room'])).toContain('publicUrls.site must be an origin');
    expect(await renderFails(['--set', 'publicUrls.api=https://api.example.com'])).toContain("additional properties 'api' not allowed");
  });

  it('PostgreSQL values that cannot work are refused: a URL that is not postgres://, two sources, a read replica without the primary it goes with', async () => {
    expect(await renderFails(['--set', 'postgresql.external.url=mysql://db:3306/room'])).toContain('/postgresql/external/url');
    expect(await renderFails(['--set', 'postgresql.external.readUrl=redis://db:6379'])).toContain('/postgresql/external/readUrl');
    expect(await renderFails(['--set', 'postgresql.external.url=postgres://db/room', '--set', 'postgresql.external.existingSecret=db'])).toContain('not both');
    // A read replica of the bundled PostgreSQL (which has none), or of a Secret's URL given beside it as a value.
    expect(await renderFails(['--set', 'postgresql.external.readUrl=postgres://replica/room'])).toContain(
      'postgresql.external.readUrl goes with postgresql.external.url',
    );
    expect(await renderFails(['--set', 'postgresql.external.existingSecret=db', '--set', 'postgresql.external.readUrl=postgres://replica/room'])).toContain(
      'postgresql.external.readUrl goes with postgresql.external.url',
    );
    expect(await renderFails(['--set', 'postgresql.external.existingSecretReadKey=read-url'])).toContain(
      'postgresql.external.existingSecret, which is not set',
    );
    expect(await renderFails(['--set', 'record.retentionDays=-1'])).toContain('/record/retentionDays');
    expect(await renderFails(['--set', 'record.egress.externalPostgresPorts={0}'])).toContain('/record/egress/externalPostgresPorts/0');
  });
});

// ---------------------------------------------------------------------------------------------

const SCHEMAS = { room: roomEnv, messaging: messagingEnv, delivery: deliveryEnv, auth: authEnv, edge: edgeEnv, record: recordEnv } as const;
type ServiceName = keyof typeof SCHEMAS;
const SERVICES = Object.keys(SCHEMAS) as ServiceName[];
/** Every Deployment that runs the Agent Room image. */
const WORKLOADS = SERVICES;
/** The services that keep their state in Redis: all but the record, whose state is PostgreSQL. */
const REDIS_SERVICES = SERVICES.filter((name) => name !== 'record');

/** Variables the chart leaves to the service's default on purpose (extraEnv sets them when needed). */
// REDIS_WAIT_REPLICAS is set only when redis.waitReplicas is: unset, a service waits for a replica
// when its Redis has one (the external-url combination sets it).
const LEFT_TO_DEFAULT: Record<ServiceName, string[]> = {
  // PORT only makes the default SITE_URL, which the chart always sets.
  room: ['PORT', 'REDIS_WAIT_REPLICAS'],
  messaging: ['PORT', 'REDIS_WAIT_REPLICAS'],
  // WEBHOOKS_ALLOW_PRIVATE_TARGETS lets delivery POST webhooks to private and loopback addresses, for
  // tests on one machine: never set (a test below says so).
  delivery: ['PORT', 'REDIS_WAIT_REPLICAS', 'WEBHOOKS_ALLOW_PRIVATE_TARGETS'],
  // OAUTH_CIMD_ALLOW_LOOPBACK lets auth read client metadata documents on loopback addresses, for
  // tests on one machine: never set (a test below says so). OAUTH_ACCESS_TOKEN_TTL_SECONDS keeps its
  // hour unless extraEnv sets it; TOKEN_ROTATION_GRACE_SECONDS its five minutes (tests shorten it).
  auth: ['PORT', 'REDIS_WAIT_REPLICAS', 'PASSWORD_HASH_COST', 'OAUTH_CIMD_ALLOW_LOOPBACK', 'OAUTH_ACCESS_TOKEN_TTL_SECONDS', 'TOKEN_ROTATION_GRACE_SECONDS'],
  edge: ['PORT', 'REDIS_WAIT_REPLICAS', 'LIVE_HEARTBEAT_MS', 'LIVE_MAX_BUFFERED_BYTES'],
  // The record has no Redis and no public URLs; DATA_DIR is PGlite's (the chart always gives a
  // PostgreSQL), DATABASE_READ_URL only with a read replica (the external combinations set it).
  record: ['PORT', 'SITE_URL', 'API_URL', 'REDIS_URL', 'REDIS_KEY_PREFIX', 'REDIS_WAIT_REPLICAS', 'REDIS_WAIT_TIMEOUT_MS', 'DATA_DIR', 'DATABASE_READ_URL'],
};

/** Stand-ins for values held in Secrets the user manages (the chart never sees them). */
const FROM_USER_SECRETS: Record<string, string> = {
  REDIS_URL: 'redis://:from-a-secret@redis.example.internal:6379/0',
  CURSOR_SECRET: 'a-cursor-key-from-a-secret-of-at-least-32-bytes',
  DATABASE_URL: 'postgres://room:from-a-secret@postgres.example.internal:5432/room',
  DATABASE_READ_URL: 'postgres://room:from-a-secret@postgres-replica.example.internal:5432/room',
  POSTGRES_PASSWORD: 'a-postgres-password-from-a-secret',
  REDIS_PASSWORD: 'a-redis-password-from-a-secret',
  REDISCLI_AUTH: 'a-redis-password-from-a-secret',
};

/** Host and port of a gRPC target the chart sets: `dns:///<headless Service>:<port>`, so gRPC resolves every pod. */
function dialTarget(target: string): [string, string] {
  const match = /^dns:\/\/\/([^:/]+):(\d+)$/.exec(target);
  if (!match) throw new Error(`${target} is not dns:///<host>:<port>`);
  return [match[1]!, match[2]!];
}

/** A container's environment as the service will see it; Secret-sourced values resolved. */
function environment(r: Rendered, c: Container): Record<string, string> {
  const env: Record<string, string> = {};
  for (const v of c.env) {
    if (v.value !== undefined) env[v.name] = v.value;
    else if (v.valueFrom?.secretKeyRef) {
      const { name, key } = v.valueFrom.secretKeyRef;
      const value = r.secretValue(name, key) ?? FROM_USER_SECRETS[v.name];
      if (value === undefined) throw new Error(`${c.name}: ${v.name} comes from ${name}/${key}, which nothing provides`);
      env[v.name] = value;
    } else throw new Error(`${c.name}: ${v.name} has neither a value nor a secretKeyRef`);
  }
  return env;
}

describe("each service's environment fits its own zod schema", () => {
  for (const name of Object.keys(COMBINATIONS)) {
    it.each(SERVICES)(`${name}: %s`, (svc) => {
      const r = of(name);
      const [c] = r.deployment(svc).spec.template.spec.containers;
      const schema = SCHEMAS[svc];
      const known = Object.keys(schema.shape);
      const names = c!.env.map((v) => v.name);
      // Each variable once, and none the service would ignore: the OpenTelemetry SDK reads its own (see 'Tracing').
      expect(names.length).toBe(new Set(names).size);
      expect(names.filter((n) => !known.includes(n) && !n.startsWith('OTEL_'))).toEqual([]);
      // Every variable the schema knows is set, or left to its default on purpose.
      expect(known.filter((k) => !names.includes(k) && !LEFT_TO_DEFAULT[svc].includes(k))).toEqual([]);
      // Required ones (no default) are there.
      const shape: Record<string, z.ZodType> = schema.shape;
      const required = known.filter((k) => !shape[k]!.safeParse(undefined).success);
      expect(required.filter((k) => !names.includes(k))).toEqual([]);
      const parsed = schema.safeParse(environment(r, c!));
      expect(parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`)).toEqual([]);
    });
  }

  it('REDIS_URL, DATABASE_URL, DATABASE_READ_URL, CURSOR_SECRET and the passwords come from Secrets in every combination, never from a plain value', () => {
    const secretNames = ['REDIS_URL', 'CURSOR_SECRET', 'REDIS_PASSWORD', 'REDISCLI_AUTH', 'DATABASE_URL', 'DATABASE_READ_URL', 'POSTGRES_PASSWORD'];
    const seen = new Set<string>();
    for (const r of rendered.values()) {
      for (const w of r.workloads().values()) {
        for (const c of [...w.spec.template.spec.containers, ...w.spec.template.spec.initContainers]) {
          for (const v of c.env.filter((e) => secretNames.includes(e.name))) {
            seen.add(v.name);
            expect(v.value, `${c.name} ${v.name}`).toBeUndefined();
            expect(v.valueFrom?.secretKeyRef, `${c.name} ${v.name}`).toBeDefined();
          }
        }
      }
    }
    expect([...seen].sort()).toEqual([...secretNames].sort());
  });

  it('no password or URL with one is in a ConfigMap, a plain environment value or any other object than a Secret', () => {
    for (const [name, r] of rendered) {
      // What the chart was given or drew: the external URLs, and every value of the Secret it rendered.
      const secrets = new Set([EXTERNAL_URL, EXTERNAL_DATABASE_URL, EXTERNAL_DATABASE_READ_URL, 's3cret', 'pg-primary-s3cret', 'pg-replica-s3cret']);
      for (const o of r.all('Secret')) for (const value of Object.values(secret.parse(o).data)) secrets.add(Buffer.from(value, 'base64').toString('utf8'));
      for (const value of [...secrets]) {
        const password = /^[a-z+]+:\/\/[^:/@]*:([^@]+)@/.exec(value)?.[1];
        if (password !== undefined) secrets.add(password);
      }
      const others = r.objects.filter((o) => o.kind !== 'Secret').map((o) => JSON.stringify(o));
      expect(others.length, name).toBeGreaterThan(0);
      for (const value of secrets) {
        expect(value.length, `${name}: ${value}`).toBeGreaterThanOrEqual(6);
        expect(
          others.filter((text) => text.includes(value)),
          `${name}: a secret value outside a Secret`,
        ).toEqual([]);
      }
    }
  });

  it('room, messaging and the record sign cursors with the same key (a cursor of one pages the other); CURSOR_SECRET comes from the chart Secret or yours', () => {
    for (const [name, r] of rendered) {
      const refs = (['room', 'messaging', 'record'] as const).map(
        (svc) => r.deployment(svc).spec.template.spec.containers[0]!.env.find((v) => v.name === 'CURSOR_SECRET')?.valueFrom?.secretKeyRef,
      );
      expect(refs[0], name).toEqual(refs[1]);
      expect(refs[0], name).toEqual(refs[2]);
      expect(refs[0]?.name, name).toBe(name.includes('own-secret') || name === 'external-secret' ? 'my-secrets' : FULLNAME);
      const value = r.secretValue(refs[0]!.name, refs[0]!.key);
      if (value !== undefined) expect(Buffer.byteLength(value)).toBeGreaterThanOrEqual(32);
    }
  });

  it('OAUTH_CIMD_ALLOW_LOOPBACK is never set: a deployment reads no client metadata document on a loopback address', () => {
    for (const [name, r] of rendered) {
      for (const w of r.workloads().values()) {
        for (const c of [...w.spec.template.spec.containers, ...w.spec.template.spec.initContainers]) {
          expect(
            c.env.map((v) => v.name),
            `${name} ${c.name}`,
          ).not.toContain('OAUTH_CIMD_ALLOW_LOOPBACK');
        }
      }
    }
  });

  it('WEBHOOKS_ALLOW_PRIVATE_TARGETS is never set: a deployment POSTs no webhook to a private or loopback address', () => {
    for (const [name, r] of rendered) {
      for (const w of r.workloads().values()) {
        for (const c of [...w.spec.template.spec.containers, ...w.spec.template.spec.initContainers]) {
          expect(
            c.env.map((v) => v.name),
            `${name} ${c.name}`,
          ).not.toContain('WEBHOOKS_ALLOW_PRIVATE_TARGETS');
        }
      }
    }
    // …so delivery runs with its default, which refuses them.
    const delivery = of('defaults').deployment('delivery').spec.template.spec.containers[0]!;
    expect(deliveryEnv.parse(environment(of('defaults'), delivery)).WEBHOOKS_ALLOW_PRIVATE_TARGETS).toBe(false);
  });

  it('extraEnv replaces a variable the chart sets instead of adding a second one', () => {
    const env = of('bundled-own-secret').deployment('edge').spec.template.spec.containers[0]!.env;
    expect(env.filter((v) => v.name === 'QUOTA_PER_TOKEN')).toEqual([{ name: 'QUOTA_PER_TOKEN', value: '50000' }]);
    expect(env.find((v) => v.name === 'LIVE_HEARTBEAT_MS')?.value).toBe('20000');
  });

  it('the record reads its own variables and no Redis: its address, the room to follow, PostgreSQL, retention, the cursor key', () => {
    const base = [
      'LOG_LEVEL',
      'LOG_FORMAT',
      'ADMIN_PORT',
      'SHUTDOWN_GRACE_MS',
      'SHUTDOWN_DELAY_MS',
      'GRPC_DEADLINE_MS',
      'CURSOR_SECRET',
      'RECORD_GRPC_ADDR',
      'ROOM_ADDR',
      'RECORD_RETENTION_DAYS',
      'DATABASE_URL',
    ];
    for (const [name, r] of rendered) {
      const c = r.deployment('record').spec.template.spec.containers[0]!;
      // The OpenTelemetry SDK's own variables, with tracing on, are the same for every service (see 'Tracing').
      const names = c.env.map((v) => v.name).filter((n) => !n.startsWith('OTEL_'));
      // DATABASE_READ_URL only when a read replica is given (the external ones here).
      const wanted = name.startsWith('external-') ? [...base, 'DATABASE_READ_URL'] : base;
      expect(names.length, name).toBe(new Set(names).size);
      expect([...names].sort(), name).toEqual([...wanted].sort());
      expect(
        names.filter((n) => n.startsWith('REDIS_')),
        name,
      ).toEqual([]);
    }
    const env = (name: string): Record<string, string> => environment(of(name), of(name).deployment('record').spec.template.spec.containers[0]!);
    expect(env('defaults').RECORD_RETENTION_DAYS).toBe('0');
    expect(env('external-url').RECORD_RETENTION_DAYS).toBe('365');
    // extraEnv replaces a variable the chart sets.
    expect(env('bundled-own-secret').LOG_LEVEL).toBe('debug');
    expect(env('external-url').DATABASE_URL).toBe(EXTERNAL_DATABASE_URL);
    expect(env('external-url').DATABASE_READ_URL).toBe(EXTERNAL_DATABASE_READ_URL);
    const refs = (name: string): unknown[] =>
      ['DATABASE_URL', 'DATABASE_READ_URL'].map(
        (variable) =>
          of(name)
            .deployment('record')
            .spec.template.spec.containers[0]!.env.find((v) => v.name === variable)?.valueFrom?.secretKeyRef,
      );
    expect(refs('external-secret')).toEqual([
      { name: 'my-postgres', key: 'url' },
      { name: 'my-postgres', key: 'read-url' },
    ]);
    expect(refs('bundled-own-secret')).toEqual([{ name: 'my-secrets', key: 'database-url' }, undefined]);
    expect(refs('defaults')).toEqual([{ name: FULLNAME, key: 'database-url' }, undefined]);
  });

  it('edge and auth (removing posts, the audit) reach the record at RECORD_ADDR; no other service calls it', () => {
    for (const [name, r] of rendered) {
      for (const caller of ['edge', 'auth'] as const) {
        const [host, port] = dialTarget(r.deployment(caller).spec.template.spec.containers[0]!.env.find((v) => v.name === 'RECORD_ADDR')!.value!);
        expect([host, port], `${name} ${caller}`).toEqual([`${FULLNAME}-record-headless`, '50055']);
      }
      for (const svc of WORKLOADS.filter((w) => w !== 'edge' && w !== 'auth')) {
        expect(
          r.deployment(svc).spec.template.spec.containers[0]!.env.map((v) => v.name),
          `${name} ${svc}`,
        ).not.toContain('RECORD_ADDR');
      }
    }
  });

  it('public addresses: explicit values win, else the Ingress host, else a port-forward', () => {
    const site = (name: string, component = 'edge'): [string | undefined, string | undefined] => {
      const env = of(name).deployment(component).spec.template.spec.containers[0]!.env;
      return [env.find((v) => v.name === 'SITE_URL')?.value, env.find((v) => v.name === 'API_URL')?.value];
    };
    expect(site('defaults')).toEqual(['http://localhost:8080', 'http://localhost:8080/api']);
    expect(site('external-url')).toEqual(['https://room.example.com', 'https://room.example.com/api']);
    expect(site('external-secret')).toEqual(['http://room.example.org', 'http://room.example.org/api']);
    expect(site('bundled-own-secret', 'auth')).toEqual(['https://room.example.net', 'https://room.example.net/api']);
    // The documents Envoy serves are rendered for the same addresses.
    const docs = of('bundled-own-secret').deployment('envoy').spec.template.spec.initContainers[0]!;
    expect(Object.fromEntries(docs.env.map((v) => [v.name, v.value]))).toEqual({
      SITE_URL: 'https://room.example.net',
      API_URL: 'https://room.example.net/api',
    });
  });
});

// ---------------------------------------------------------------------------------------------

describe('what is rendered', () => {
  it('external Redis (by URL or by Secret) renders no Redis StatefulSet, Service or NetworkPolicy; services read the URL you gave', () => {
    for (const name of ['external-url', 'external-secret']) {
      const r = of(name);
      expect(r.all('StatefulSet'), name).toEqual([]);
      expect(r.find('Service', `${FULLNAME}-redis`), name).toBeUndefined();
      expect(r.find('NetworkPolicy', `${FULLNAME}-redis`), name).toBeUndefined();
    }
    const byUrl = of('external-url');
    const ref = byUrl.deployment('room').spec.template.spec.containers[0]!.env.find((v) => v.name === 'REDIS_URL')?.valueFrom?.secretKeyRef;
    expect(byUrl.secretValue(ref!.name, ref!.key)).toBe(EXTERNAL_URL);
    for (const svc of REDIS_SERVICES) {
      const env = of('external-secret').deployment(svc).spec.template.spec.containers[0]!.env;
      expect(env.find((v) => v.name === 'REDIS_URL')?.valueFrom?.secretKeyRef).toEqual({ name: 'my-redis', key: 'url' });
    }
    // Neither the cursor key nor a Redis URL is the chart's to keep there: it renders no Secret.
    expect(of('external-secret').all('Secret')).toEqual([]);
  });

  it('bundled Redis: the official image pinned by tag, AOF fsynced every second, a volume, the password from the Secret', () => {
    const r = of('defaults');
    const redis = r.get(workload, 'StatefulSet', `${FULLNAME}-redis`);
    expect(redis.spec.volumeClaimTemplates).toHaveLength(1);
    const [c] = redis.spec.template.spec.containers;
    expect(c!.image).toMatch(/^redis:\d+\.\d+\.\d+$/);
    const args = c!.args.join(' ');
    expect(args).toContain('--appendonly yes');
    expect(args).toContain('--appendfsync everysec');
    expect(args).toContain('--requirepass $(REDIS_PASSWORD)');
    expect(c!.volumeMounts.find((m) => m.name === 'data')?.mountPath).toBe('/data');
    // The URL the services get names this Redis, with this password.
    const password = c!.env.find((v) => v.name === 'REDIS_PASSWORD')?.valueFrom?.secretKeyRef;
    const url = r.deployment('edge').spec.template.spec.containers[0]!.env.find((v) => v.name === 'REDIS_URL')?.valueFrom?.secretKeyRef;
    const parsed = new URL(r.secretValue(url!.name, url!.key)!);
    expect(parsed.hostname).toBe(`${FULLNAME}-redis`);
    expect(parsed.password).toBe(r.secretValue(password!.name, password!.key));
    expect(parsed.password.length).toBeGreaterThanOrEqual(32);
    expect(r.services().find((s) => s.metadata.name === `${FULLNAME}-redis`)?.spec.ports[0]?.port).toBe(Number(parsed.port));
  });

  it('external PostgreSQL (by URL or by Secret) renders no PostgreSQL StatefulSet, Service or NetworkPolicy, and no password for one', () => {
    for (const name of ['external-url', 'external-secret']) {
      const r = of(name);
      expect(r.find('StatefulSet', `${FULLNAME}-postgresql`), name).toBeUndefined();
      expect(r.find('Service', `${FULLNAME}-postgresql`), name).toBeUndefined();
      expect(r.find('NetworkPolicy', `${FULLNAME}-postgresql`), name).toBeUndefined();
    }
    expect(of('external-url').secretValue(FULLNAME, 'postgresql-password')).toBeUndefined();
    expect(of('external-url').secretValue(FULLNAME, 'database-url')).toBe(EXTERNAL_DATABASE_URL);
    expect(of('external-url').secretValue(FULLNAME, 'database-read-url')).toBe(EXTERNAL_DATABASE_READ_URL);
    expect(of('defaults').secretValue(FULLNAME, 'database-read-url')).toBeUndefined();
  });

  it('bundled PostgreSQL: the official postgres 15 image pinned by tag, its data on a volume, the password from the Secret, and the URL the record gets names it', () => {
    for (const name of ['defaults', 'bundled-own-secret']) {
      const pg = of(name).get(workload, 'StatefulSet', `${FULLNAME}-postgresql`);
      expect(pg.spec.replicas).toBe(1);
      expect(pg.spec.volumeClaimTemplates, name).toHaveLength(1);
      expect(pg.spec.template.spec.containers[0]!.image, name).toMatch(/^postgres:15\.\d+-bookworm$/);
    }
    const r = of('defaults');
    const pg = r.get(workload, 'StatefulSet', `${FULLNAME}-postgresql`);
    const [c] = pg.spec.template.spec.containers;
    expect(c!.args).toEqual(['postgres']);
    expect(c!.command).toBeUndefined();
    const env = environment(r, c!);
    // The data in a folder below the volume's mount, which may hold lost+found.
    const data = c!.volumeMounts.find((m) => m.name === 'data')!.mountPath;
    expect(data).toBe('/var/lib/postgresql/data');
    expect(env.PGDATA!.startsWith(`${data}/`)).toBe(true);
    // The URL the record gets names this PostgreSQL, its user, database and password.
    const url = new URL(environment(r, r.deployment('record').spec.template.spec.containers[0]!).DATABASE_URL!);
    expect(url.protocol).toBe('postgres:');
    expect(url.hostname).toBe(`${FULLNAME}-postgresql`);
    expect(decodeURIComponent(url.username)).toBe(env.POSTGRES_USER);
    expect(url.pathname).toBe(`/${env.POSTGRES_DB}`);
    expect(decodeURIComponent(url.password)).toBe(env.POSTGRES_PASSWORD);
    expect(env.POSTGRES_PASSWORD!.length).toBeGreaterThanOrEqual(32);
    const pgService = r.services().find((svc) => svc.metadata.name === `${FULLNAME}-postgresql`)!;
    expect(pgService.spec.clusterIP).toBe('None');
    const servicePort = pgService.spec.ports.find((p) => p.port === Number(url.port))!;
    expect(r.port('postgresql', servicePort.targetPort)).toBe(5432);
    // The password is drawn once and read back on upgrades (lookup), like the others.
    expect(r.secretValue(FULLNAME, 'postgresql-password')).toBe(env.POSTGRES_PASSWORD);
    // The image stops it with SIGINT (a fast shutdown); its final checkpoint gets two minutes before SIGKILL.
    expect(pg.spec.template.spec.terminationGracePeriodSeconds).toBe(120);
  });

  it("bundled PostgreSQL's probes ask pg_isready on the port it listens on; readiness wants it accepting connections, liveness only that it answers", () => {
    const r = of('defaults');
    const c = r.get(workload, 'StatefulSet', `${FULLNAME}-postgresql`).spec.template.spec.containers[0]!;
    const port = String(r.port('postgresql', 'postgresql'));
    for (const p of [c.startupProbe, c.readinessProbe, c.livenessProbe]) {
      const command = p?.exec?.command.join(' ') ?? '';
      expect(command).toContain('pg_isready');
      expect(command).toContain(`-h 127.0.0.1 -p ${port}`);
    }
    // pg_isready exits 0 accepting, 1 rejecting (starting, recovering), 2 no answer.
    expect(c.readinessProbe?.exec?.command).toEqual(['pg_isready', '-q', '-h', '127.0.0.1', '-p', port, '-U', 'agentroom', '-d', 'agentroom']);
    for (const p of [c.startupProbe, c.livenessProbe]) expect(p?.exec?.command.at(-1)).toMatch(/; \[ \$\? -ne 2 \]$/);
  });

  it('autoscaling on: an HPA per Deployment and no replicas field to fight it; off: the replicas asked for', () => {
    for (const component of [...WORKLOADS, 'envoy']) {
      const on = of('external-url');
      expect(on.deployment(component).spec.replicas, component).toBeUndefined();
      const scaler = on.get(hpa, 'HorizontalPodAutoscaler', `${FULLNAME}-${component}`);
      expect(scaler.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: `${FULLNAME}-${component}` });
      expect(of('defaults').deployment(component).spec.replicas, component).toBe(2);
      expect(of('defaults').find('HorizontalPodAutoscaler', `${FULLNAME}-${component}`)).toBeUndefined();
    }
    const edge = of('external-secret').get(hpa, 'HorizontalPodAutoscaler', `${FULLNAME}-edge`);
    expect([edge.spec.minReplicas, edge.spec.maxReplicas]).toEqual([3, 12]);
    expect(of('external-secret').deployment('room').spec.replicas).toBe(2);
    expect(of('bundled-own-secret').deployment('edge').spec.replicas).toBe(4);
    expect(of('bundled-own-secret').deployment('delivery').spec.replicas).toBe(3);
    expect(of('bundled-own-secret').deployment('record').spec.replicas).toBe(3);
  });

  it('PodDisruptionBudgets follow their toggle', () => {
    expect(
      of('defaults')
        .all('PodDisruptionBudget')
        .map((o) => o.metadata.name)
        .sort(),
    ).toEqual(['auth', 'delivery', 'edge', 'envoy', 'messaging', 'record', 'room'].map((c) => `${FULLNAME}-${c}`));
    expect(of('bundled-own-secret').all('PodDisruptionBudget')).toEqual([]);
  });

  it('gRPC clients dial headless Services that lead to the right pods and ports', () => {
    for (const r of rendered.values()) {
      const services = r.services();
      for (const svc of ['room', 'messaging', 'auth', 'delivery', 'record']) {
        const headless = services.find((s) => s.metadata.name === `${FULLNAME}-${svc}-headless`);
        expect(headless?.spec.clusterIP).toBe('None');
      }
      for (const svc of WORKLOADS) {
        for (const v of r.deployment(svc).spec.template.spec.containers[0]!.env.filter((e) => /^(ROOM|AUTH|MESSAGING|DELIVERY|RECORD)_ADDR$/.test(e.name))) {
          const [host, port] = dialTarget(v.value!);
          const target = services.find((s) => s.metadata.name === host);
          expect(target?.spec.clusterIP, `${svc} ${v.name}`).toBe('None');
          const servicePort = target!.spec.ports.find((p) => p.port === Number(port));
          const component = target!.spec.selector[COMPONENT]!;
          expect(v.name.startsWith(component.toUpperCase()), `${v.name} leads to ${component}`).toBe(true);
          expect(r.port(component, servicePort!.targetPort)).toBe(Number(port));
          // …and that pod listens there.
          const listen = environment(r, r.deployment(component).spec.template.spec.containers[0]!)[`${component.toUpperCase()}_GRPC_ADDR`];
          expect(listen).toBe(`0.0.0.0:${port}`);
        }
      }
    }
  });

  it('probes: native gRPC health for room, messaging and delivery, /readyz and /livez on the admin port for edge, auth and the record, /ready for Envoy', () => {
    const r = of('defaults');
    const probes = (component: string): Container => r.deployment(component).spec.template.spec.containers[0]!;
    for (const [svc, port] of [
      ['room', 50051],
      ['messaging', 50052],
      ['delivery', 50054],
    ] as const) {
      expect(probes(svc).readinessProbe?.grpc?.port).toBe(port);
      expect(probes(svc).startupProbe?.grpc?.port).toBe(port);
      expect(probes(svc).livenessProbe?.httpGet).toMatchObject({ path: '/livez' });
    }
    expect(probes('auth').startupProbe?.grpc?.port).toBe(50053);
    for (const svc of ['auth', 'edge', 'record']) {
      expect(probes(svc).readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'admin' });
      expect(probes(svc).livenessProbe?.httpGet).toEqual({ path: '/livez', port: 'admin' });
    }
    expect(probes('record').startupProbe?.httpGet).toEqual({ path: '/livez', port: 'admin' });
    for (const svc of WORKLOADS) {
      const c = probes(svc);
      expect(r.port(svc, 'admin')).toBe(9090);
      expect(environment(r, c).ADMIN_PORT).toBe('9090');
    }
    const envoy = probes('envoy');
    for (const p of [envoy.startupProbe, envoy.readinessProbe, envoy.livenessProbe]) expect(p?.httpGet).toEqual({ path: '/ready', port: 'admin' });
    expect(r.port('envoy', 'admin')).toBe(9901);
  });

  it("the record's ports are the ones its process serves: gRPC where RECORD_GRPC_ADDR listens, the probes and metrics where ADMIN_PORT does", () => {
    for (const [name, r] of rendered) {
      const c = r.deployment('record').spec.template.spec.containers[0]!;
      const env = environment(r, c);
      expect(env.RECORD_GRPC_ADDR, name).toBe(`0.0.0.0:${r.port('record', 'grpc')}`);
      expect(env.ADMIN_PORT, name).toBe(String(r.port('record', 'admin')));
      for (const p of [c.startupProbe, c.readinessProbe, c.livenessProbe]) expect(r.port('record', p!.httpGet!.port), name).toBe(Number(env.ADMIN_PORT));
      const headless = r.services().find((svc) => svc.metadata.name === `${FULLNAME}-record-headless`)!;
      expect(headless.metadata.labels['agent-room.dev/metrics'], name).toBe('true');
      expect(
        headless.spec.ports.map((p) => [p.name, p.port, r.port('record', p.targetPort)]),
        name,
      ).toEqual([
        ['grpc', 50055, 50055],
        ['admin', 9090, Number(env.ADMIN_PORT)],
      ]);
    }
  });

  it('after SIGTERM a pod keeps serving, unready, for SHUTDOWN_DELAY_MS, and is killed only after its SHUTDOWN_GRACE_MS has passed too', () => {
    for (const r of rendered.values()) {
      for (const svc of WORKLOADS) {
        const spec = r.deployment(svc).spec.template.spec;
        const env = environment(r, spec.containers[0]!);
        const delay = Number(env.SHUTDOWN_DELAY_MS) / 1000;
        const grace = Number(env.SHUTDOWN_GRACE_MS) / 1000;
        // auth drains its pages and then its gRPC calls, each up to SHUTDOWN_GRACE_MS.
        const phases = svc === 'auth' ? 2 : 1;
        expect(delay, svc).toBeGreaterThan(0);
        expect(spec.terminationGracePeriodSeconds!, svc).toBeGreaterThan(delay + phases * grace);
      }
      // Envoy has no such delay of its own: a preStop sleep keeps it serving while it leaves the Service.
      const envoy = r.deployment('envoy').spec.template.spec;
      const sleep = envoy.containers[0]!.lifecycle?.preStop?.sleep?.seconds ?? 0;
      expect(sleep).toBeGreaterThan(0);
      expect(envoy.terminationGracePeriodSeconds!).toBeGreaterThan(sleep);
    }
    expect(of('bundled-own-secret').deployment('room').spec.template.spec.terminationGracePeriodSeconds).toBe(10 + 30 + 5);
    expect(of('defaults').deployment('auth').spec.template.spec.terminationGracePeriodSeconds).toBe(10 + 20 + 5);
  });

  it('every container runs as non-root with a read-only root, no privilege escalation, no capabilities, RuntimeDefault seccomp, and a writable /tmp', () => {
    for (const [name, r] of rendered) {
      const pods = [...r.workloads().values()].map((w) => w.spec.template.spec);
      pods.push(podSpec.parse(r.get(z.object({ spec: podSpec }), 'Pod', `${FULLNAME}-test`).spec));
      for (const pod of pods) {
        for (const c of [...pod.containers, ...pod.initContainers]) {
          const sc = { ...pod.securityContext, ...c.securityContext };
          const where = `${name} ${c.name}`;
          expect(sc.runAsNonRoot, where).toBe(true);
          expect(sc.readOnlyRootFilesystem, where).toBe(true);
          expect(sc.allowPrivilegeEscalation, where).toBe(false);
          expect(sc.capabilities?.drop, where).toEqual(['ALL']);
          expect(sc.seccompProfile?.type, where).toBe('RuntimeDefault');
          // Redis and PostgreSQL run as their images' users (999).
          expect(sc.runAsUser, where).toBe(c.name === 'redis' || c.name === 'postgresql' ? 999 : 1000);
          const tmp = c.volumeMounts.find((m) => m.mountPath === '/tmp');
          expect(pod.volumes.find((v) => v.name === tmp?.name)?.emptyDir, where).toBeDefined();
        }
      }
    }
  });

  it('each service runs its own entry point of the one image', () => {
    const r = of('bundled-own-secret');
    for (const svc of WORKLOADS) {
      const [c] = r.deployment(svc).spec.template.spec.containers;
      expect(c!.image).toBe('registry.example.com/agent-room:1.2.3');
      expect(c!.args).toEqual([`services/${svc}/dist/main.js`]);
      expect(c!.command).toBeUndefined();
    }
    expect(of('defaults').deployment('room').spec.template.spec.containers[0]!.image).toBe('agent-room:0.1.0');
  });
});

// ---------------------------------------------------------------------------------------------

describe('Envoy', () => {
  it('gets the bootstrap with its upstreams named after the release, and each upstream leads to ready pods it may reach', () => {
    for (const [name, r] of rendered) {
      const bootstrap = r.get(configMap, 'ConfigMap', `${FULLNAME}-envoy`).data['envoy.yaml']!;
      expect(bootstrap).not.toMatch(/__(EDGE|AUTH)_HOST__/);
      const upstreams = socketAddresses(parse(bootstrap)).filter((a) => r.services().some((s) => s.metadata.name === a.host));
      const hosts = new Set(upstreams.map((a) => a.host));
      expect([...hosts].sort(), name).toEqual([`${FULLNAME}-auth`, `${FULLNAME}-edge`]);
      for (const { host, port, healthPort } of upstreams) {
        const target = r.services().find((s) => s.metadata.name === host)!;
        // Headless: Envoy resolves every pod and health-checks each one.
        expect(target.spec.clusterIP).toBe('None');
        const component = target.spec.selector[COMPONENT]!;
        for (const p of [port, ...(healthPort === undefined ? [] : [healthPort])]) {
          const servicePort = target.spec.ports.find((sp) => sp.port === p);
          expect(servicePort, `${host}:${p}`).toBeDefined();
          expect(r.port(component, servicePort!.targetPort)).toBe(p);
          if (r.all('NetworkPolicy').length > 0) expect(r.flows()).toContain(`envoy -> ${component}:${p}`);
        }
      }
    }
  });

  it("believes X-Forwarded-For from one proxy behind an Ingress, from none when Envoy is the entry, and shows edge's per-address quota", async () => {
    const hops = (r: Rendered): string | undefined =>
      /xff_num_trusted_hops: (\S+)/.exec(r.get(configMap, 'ConfigMap', `${FULLNAME}-envoy`).data['envoy.yaml']!)?.[1];
    const limit = (r: Rendered): string | undefined =>
      /local LIMIT = "([^"]*)"/.exec(r.get(configMap, 'ConfigMap', `${FULLNAME}-envoy`).data['envoy.yaml']!)?.[1];
    expect(hops(of('defaults'))).toBe('0');
    expect(hops(of('external-url'))).toBe('1');
    expect(limit(of('defaults'))).toBe('5000');
    const explicit = await render('hops-explicit', {
      ingress: { enabled: true, hosts: ['room.example.com'] },
      envoy: { trustedProxyHops: 2 },
      quota: { perAddress: 900 },
    });
    expect(hops(explicit)).toBe('2');
    expect(limit(explicit)).toBe('900');
    expect(of('defaults').get(configMap, 'ConfigMap', `${FULLNAME}-envoy`).data['envoy.yaml']).not.toMatch(/__[A-Z_]+__/);
  });

  it('names no document: the same bootstrap whatever image and addresses the init container makes the documents of (docs/decisions.md §31)', async () => {
    const bootstrap = (r: Rendered): string => r.get(configMap, 'ConfigMap', `${FULLNAME}-envoy`).data['envoy.yaml']!;
    const defaults = bootstrap(of('defaults'));
    expect(bootstrap(await render('docs-image', { image: { tag: '9.9.9' } }))).toBe(defaults);
    expect(bootstrap(await render('docs-site', { publicUrls: { site: 'https://room.example.org' } }))).toBe(defaults);
    expect(defaults).not.toMatch(/problems\/[a-z]/);
  });

  it('an init container renders the discovery documents into the volume Envoy serves them from', () => {
    const pod = of('defaults').deployment('envoy').spec.template.spec;
    const [docs] = pod.initContainers;
    expect(docs!.image).toBe('agent-room:0.1.0');
    expect(docs!.args).toEqual(['gateway/dist/render.js', 'docs', '--out', '/etc/agent-room/docs']);
    const into = docs!.volumeMounts.find((m) => m.mountPath === '/etc/agent-room/docs');
    const envoy = pod.containers[0]!;
    expect(envoy.volumeMounts.find((m) => m.mountPath === '/etc/agent-room/docs')).toEqual({
      name: into!.name,
      mountPath: '/etc/agent-room/docs',
      readOnly: true,
    });
    expect(pod.volumes.find((v) => v.name === into!.name)?.emptyDir).toBeDefined();
    const config = envoy.volumeMounts.find((m) => m.mountPath === '/etc/envoy');
    expect(pod.volumes.find((v) => v.name === config!.name)?.configMap?.name).toBe(`${FULLNAME}-envoy`);
    expect(envoy.args.join(' ')).toContain('--config-path /etc/envoy/envoy.yaml');
  });

  it('a changed envoy.yaml changes the checksum annotation, so an upgrade rolls Envoy; other changes do not', async () => {
    const copy = join(work, 'chart-copy');
    await cp(chart, copy, { recursive: true });
    const checksum = async (name: string, values: Record<string, unknown>, dir: string): Promise<string | undefined> =>
      (await render(name, values, dir)).deployment('envoy').spec.template.metadata.annotations['checksum/config'];
    const before = await checksum('checksum-before', {}, copy);
    expect(before).toMatch(/^[0-9a-f]{64}$/);
    expect(await checksum('checksum-replicas', { room: { replicas: 5 } }, copy)).toBe(before);
    await appendFile(join(copy, 'files/envoy.yaml'), '\n# a changed route table\n');
    expect(await checksum('checksum-after', {}, copy)).not.toBe(before);
  });

  it('the Service sends port 80 to Envoy, with the type asked for; the Ingress sends every path to it', () => {
    const envoyService = (name: string): Service => of(name).get(service, 'Service', `${FULLNAME}-envoy`);
    expect(envoyService('defaults').spec.type).toBe('ClusterIP');
    expect(envoyService('external-secret').spec).toMatchObject({
      type: 'LoadBalancer',
      externalTrafficPolicy: 'Local',
      loadBalancerSourceRanges: ['10.0.0.0/8'],
    });
    expect(envoyService('bundled-own-secret').spec.type).toBe('NodePort');
    const port = envoyService('defaults').spec.ports[0]!;
    expect([port.port, of('defaults').port('envoy', port.targetPort)]).toEqual([80, 8080]);
    expect(of('defaults').all('Ingress')).toEqual([]);
    const ing = of('external-url').get(ingress, 'Ingress', FULLNAME);
    expect(ing.spec.rules).toEqual([
      {
        host: 'room.example.com',
        http: { paths: [{ path: '/', pathType: 'Prefix', backend: { service: { name: `${FULLNAME}-envoy`, port: { name: 'http' } } } }] },
      },
    ]);
  });
});

/** Every `socket_address` of an Envoy bootstrap, with the health-check port of its endpoint. */
function socketAddresses(node: unknown, healthPort?: number): { host: string; port: number; healthPort?: number }[] {
  if (Array.isArray(node)) return node.flatMap((n) => socketAddresses(n, healthPort));
  if (typeof node !== 'object' || node === null) return [];
  const record = node as Record<string, unknown>;
  const health = z.object({ port_value: z.number() }).safeParse(record.health_check_config);
  const here = health.success ? health.data.port_value : healthPort;
  const address = z.object({ address: z.string(), port_value: z.number() }).safeParse(record.socket_address);
  const found = address.success ? [{ host: address.data.address, port: address.data.port_value, ...(here === undefined ? {} : { healthPort: here }) }] : [];
  return [
    ...found,
    ...Object.entries(record)
      .filter(([key]) => key !== 'socket_address')
      .flatMap(([, value]) => socketAddresses(value, here)),
  ];
}

// ---------------------------------------------------------------------------------------------

/** The flows the ingress NetworkPolicies admit, as `from -> to:port` (anyone, prometheus, or a component). */
function flows(r: Rendered): string[] {
  const found: string[] = [];
  for (const o of r.all('NetworkPolicy')) {
    const policy = networkPolicy.parse(o);
    if (!policy.spec.policyTypes.includes('Ingress')) continue;
    expect(policy.spec.policyTypes).toEqual(['Ingress']);
    const target = policy.spec.podSelector.matchLabels?.[COMPONENT];
    expect(policy.spec.podSelector.matchLabels?.['app.kubernetes.io/instance']).toBe(RELEASE);
    for (const rule of policy.spec.ingress) {
      const sources = (rule.from ?? [undefined]).map((peer) => {
        if (peer === undefined) return 'anyone';
        if (peer.podSelector && !peer.namespaceSelector) {
          expect(peer.podSelector.matchLabels?.['app.kubernetes.io/instance']).toBe(RELEASE);
          return peer.podSelector.matchLabels?.[COMPONENT] ?? '?';
        }
        const ns = peer.namespaceSelector?.matchLabels?.['kubernetes.io/metadata.name'];
        return ns === 'monitoring' ? 'prometheus' : `namespace ${ns}`;
      });
      for (const source of sources) for (const p of rule.ports) found.push(`${source} -> ${target}:${r.port(target!, p.port)}`);
    }
  }
  return found.sort();
}

/** The public internet, as auth's egress rule (client metadata documents) and delivery's (webhooks) name it. */
const PUBLIC_V4 = { cidr: '0.0.0.0/0', except: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16', '100.64.0.0/10', '127.0.0.0/8'] };
const PUBLIC_V6 = { cidr: '::/0', except: ['fc00::/7', 'fe80::/10', '::1/128'] };

/**
 * The flows the egress NetworkPolicies admit, as `from -> to:port[/UDP]`: a component, `public` (the
 * internet without private ranges), or `any` (any address); only those from `from`, when given.
 */
function egressFlows(r: Rendered, from?: string): string[] {
  const found: string[] = [];
  for (const o of r.all('NetworkPolicy')) {
    const policy = networkPolicy.parse(o);
    if (!policy.spec.policyTypes.includes('Egress')) continue;
    expect(policy.spec.policyTypes).toEqual(['Egress']);
    expect(policy.spec.podSelector.matchLabels?.['app.kubernetes.io/instance']).toBe(RELEASE);
    const source = policy.spec.podSelector.matchLabels?.[COMPONENT];
    if (from !== undefined && source !== from) continue;
    for (const rule of policy.spec.egress) {
      const targets = (rule.to ?? [undefined]).map((peer) => {
        if (peer === undefined) return 'any';
        if (peer.ipBlock) {
          expect([PUBLIC_V4, PUBLIC_V6]).toContainEqual(peer.ipBlock);
          return 'public';
        }
        expect(peer.podSelector?.matchLabels?.['app.kubernetes.io/instance']).toBe(RELEASE);
        return peer.podSelector?.matchLabels?.[COMPONENT] ?? '?';
      });
      for (const target of new Set(targets)) {
        for (const p of rule.ports) {
          const port = typeof p.port === 'number' ? p.port : r.port(target, p.port);
          found.push(`${source} -> ${target}:${port}${p.protocol === 'TCP' ? '' : `/${p.protocol}`}`);
        }
      }
    }
  }
  return found.sort();
}

describe("auth's egress", () => {
  it('auth reaches exactly what it calls: DNS, room, delivery, messaging, record, Redis, and HTTPS on public addresses for client metadata documents', () => {
    expect(egressFlows(of('defaults'), 'auth')).toEqual([
      'auth -> any:53',
      'auth -> any:53/UDP',
      'auth -> delivery:50054',
      'auth -> messaging:50052',
      'auth -> public:443',
      'auth -> record:50055',
      'auth -> redis:6379',
      'auth -> room:50051',
    ]);
    // Both address families, each without its private, loopback, link-local and shared ranges.
    const policy = networkPolicy.parse(of('defaults').find('NetworkPolicy', `${FULLNAME}-auth-egress`));
    expect(policy.spec.egress.find((rule) => rule.ports.some((p) => p.port === 443))?.to).toEqual([{ ipBlock: PUBLIC_V4 }, { ipBlock: PUBLIC_V6 }]);
  });

  it('the room it may reach is where ROOM_ADDR leads', () => {
    const r = of('defaults');
    const [, port] = dialTarget(r.deployment('auth').spec.template.spec.containers[0]!.env.find((v) => v.name === 'ROOM_ADDR')!.value!);
    expect(egressFlows(r, 'auth')).toContain(`auth -> room:${port}`);
  });

  it('the delivery it may reach, for the webhooks /account shows, is where DELIVERY_ADDR leads, and delivery admits it there', () => {
    const r = of('defaults');
    const [, port] = dialTarget(r.deployment('auth').spec.template.spec.containers[0]!.env.find((v) => v.name === 'DELIVERY_ADDR')!.value!);
    expect(egressFlows(r, 'auth')).toContain(`auth -> delivery:${port}`);
    expect(r.flows()).toContain(`auth -> delivery:${port}`);
  });

  it('an external Redis is reached on its ports at any address; without NetworkPolicies, no egress policy', async () => {
    expect(egressFlows(of('external-secret'), 'auth')).toEqual([
      'auth -> any:53',
      'auth -> any:53/UDP',
      'auth -> any:6379',
      'auth -> delivery:50054',
      'auth -> messaging:50052',
      'auth -> public:443',
      'auth -> record:50055',
      'auth -> room:50051',
    ]);
    const ports = await render('egress-redis-ports', {
      redis: { external: { url: 'redis+cluster://:s3cret@10.0.0.1:7000,10.0.0.2:7001' } },
      auth: { egress: { externalRedisPorts: [7000, 7001] } },
    });
    expect(egressFlows(ports, 'auth').filter((flow) => flow.startsWith('auth -> any:7'))).toEqual(['auth -> any:7000', 'auth -> any:7001']);
    expect(of('external-url').find('NetworkPolicy', `${FULLNAME}-auth-egress`)).toBeUndefined();
  });

  it('auth.egress.clientMetadata.enabled=false leaves auth no way out to the internet', async () => {
    const off = await render('egress-no-metadata', { auth: { egress: { clientMetadata: { enabled: false } } } });
    expect(egressFlows(off, 'auth')).toEqual([
      'auth -> any:53',
      'auth -> any:53/UDP',
      'auth -> delivery:50054',
      'auth -> messaging:50052',
      'auth -> record:50055',
      'auth -> redis:6379',
      'auth -> room:50051',
    ]);
  });
});

describe("delivery's egress", () => {
  it('only auth, delivery and the record have egress policies; every other pod is limited by the ingress policies of what it calls', () => {
    const egress = of('defaults')
      .all('NetworkPolicy')
      .map((o) => networkPolicy.parse(o))
      .filter((policy) => policy.spec.policyTypes.includes('Egress'));
    expect(egress.map((policy) => policy.metadata.name).sort()).toEqual([
      `${FULLNAME}-auth-egress`,
      `${FULLNAME}-delivery-egress`,
      `${FULLNAME}-record-egress`,
    ]);
  });

  it('delivery reaches exactly what it calls: DNS, messaging, room, Redis, and HTTPS on public addresses for the webhooks', () => {
    expect(egressFlows(of('defaults'), 'delivery')).toEqual([
      'delivery -> any:53',
      'delivery -> any:53/UDP',
      'delivery -> messaging:50052',
      'delivery -> public:443',
      'delivery -> redis:6379',
      'delivery -> room:50051',
    ]);
    // Both address families, each without its private, loopback, link-local and shared ranges: a
    // webhook URL that resolves to a pod, a node, the cloud's metadata service or localhost is not reached.
    const policy = networkPolicy.parse(of('defaults').find('NetworkPolicy', `${FULLNAME}-delivery-egress`));
    const https = policy.spec.egress.filter((rule) => rule.to?.some((peer) => peer.ipBlock !== undefined));
    expect(https).toEqual([
      {
        to: [
          { ipBlock: { cidr: '0.0.0.0/0', except: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16', '100.64.0.0/10', '127.0.0.0/8'] } },
          { ipBlock: { cidr: '::/0', except: ['fc00::/7', 'fe80::/10', '::1/128'] } },
        ],
        ports: [{ port: 443, protocol: 'TCP' }],
      },
    ]);
    expect(policy.spec.podSelector.matchLabels?.[COMPONENT]).toBe('delivery');
  });

  it('the messaging it may reach is where MESSAGING_ADDR leads, and messaging admits it there', () => {
    const r = of('defaults');
    const [, port] = dialTarget(r.deployment('delivery').spec.template.spec.containers[0]!.env.find((v) => v.name === 'MESSAGING_ADDR')!.value!);
    expect(egressFlows(r, 'delivery')).toContain(`delivery -> messaging:${port}`);
    expect(r.flows()).toContain(`delivery -> messaging:${port}`);
    expect(r.flows()).toContain('delivery -> redis:6379');
  });

  it('the room it asks before each attempt (was the post removed?) is where ROOM_ADDR leads, and the room admits it there', () => {
    const r = of('defaults');
    const [, port] = dialTarget(r.deployment('delivery').spec.template.spec.containers[0]!.env.find((v) => v.name === 'ROOM_ADDR')!.value!);
    expect(egressFlows(r, 'delivery')).toContain(`delivery -> room:${port}`);
    expect(r.flows()).toContain(`delivery -> room:${port}`);
  });

  it('only edge and auth call delivery, on the port DELIVERY_ADDR names', () => {
    const r = of('defaults');
    const [, port] = dialTarget(r.deployment('edge').spec.template.spec.containers[0]!.env.find((v) => v.name === 'DELIVERY_ADDR')!.value!);
    expect(r.flows().filter((flow) => / -> delivery:/.test(flow))).toEqual([
      `auth -> delivery:${port}`,
      `edge -> delivery:${port}`,
      'prometheus -> delivery:9090',
    ]);
    for (const svc of SERVICES.filter((name) => name !== 'edge' && name !== 'auth')) {
      expect(
        r.deployment(svc).spec.template.spec.containers[0]!.env.map((v) => v.name),
        svc,
      ).not.toContain('DELIVERY_ADDR');
    }
  });

  it('an external Redis is reached on its ports at any address; without NetworkPolicies, no egress policy', async () => {
    expect(egressFlows(of('external-secret'), 'delivery')).toEqual([
      'delivery -> any:53',
      'delivery -> any:53/UDP',
      'delivery -> any:6379',
      'delivery -> messaging:50052',
      'delivery -> public:443',
      'delivery -> room:50051',
    ]);
    const ports = await render('delivery-egress-redis-ports', {
      redis: { external: { url: 'redis+cluster://:s3cret@10.0.0.1:7000,10.0.0.2:7001' } },
      delivery: { egress: { externalRedisPorts: [7000, 7001] } },
    });
    expect(egressFlows(ports, 'delivery').filter((flow) => flow.startsWith('delivery -> any:7'))).toEqual(['delivery -> any:7000', 'delivery -> any:7001']);
    expect(of('external-url').find('NetworkPolicy', `${FULLNAME}-delivery-egress`)).toBeUndefined();
  });

  it('delivery.egress.internet.enabled=false leaves delivery no way out to the internet, and auth its own', async () => {
    const off = await render('egress-no-webhooks', { delivery: { egress: { internet: { enabled: false } } } });
    expect(egressFlows(off, 'delivery')).toEqual([
      'delivery -> any:53',
      'delivery -> any:53/UDP',
      'delivery -> messaging:50052',
      'delivery -> redis:6379',
      'delivery -> room:50051',
    ]);
    expect(egressFlows(off, 'auth')).toContain('auth -> public:443');
  });
});

describe("the record's egress", () => {
  it('the record reaches exactly what it calls: DNS, the room it follows and the bundled PostgreSQL; no Redis, no internet', () => {
    expect(egressFlows(of('defaults'), 'record')).toEqual(['record -> any:53', 'record -> any:53/UDP', 'record -> postgresql:5432', 'record -> room:50051']);
  });

  it('the room it may reach is where ROOM_ADDR leads, and the room admits it there', () => {
    const r = of('defaults');
    const [, port] = dialTarget(r.deployment('record').spec.template.spec.containers[0]!.env.find((v) => v.name === 'ROOM_ADDR')!.value!);
    expect(egressFlows(r, 'record')).toContain(`record -> room:${port}`);
    expect(r.flows()).toContain(`record -> room:${port}`);
  });

  it('the PostgreSQL it may reach is the one DATABASE_URL names, and PostgreSQL admits the record alone, there', () => {
    const r = of('defaults');
    const url = new URL(environment(r, r.deployment('record').spec.template.spec.containers[0]!).DATABASE_URL!);
    expect(egressFlows(r, 'record')).toContain(`record -> postgresql:${url.port}`);
    expect(r.flows().filter((flow) => flow.includes('-> postgresql:'))).toEqual([`record -> postgresql:${url.port}`]);
  });

  it('an external PostgreSQL (and its read replica) is reached on its ports at any address; without NetworkPolicies, no egress policy', async () => {
    expect(egressFlows(of('external-secret'), 'record')).toEqual(['record -> any:53', 'record -> any:53/UDP', 'record -> any:5432', 'record -> room:50051']);
    const ports = await render('record-egress-postgres-ports', {
      postgresql: { external: { url: 'postgres://room:s3cret@db.example.com:6432/room', readUrl: 'postgres://room:s3cret@replica.example.com:6433/room' } },
      record: { egress: { externalPostgresPorts: [6432, 6433] } },
    });
    expect(egressFlows(ports, 'record')).toEqual([
      'record -> any:53',
      'record -> any:53/UDP',
      'record -> any:6432',
      'record -> any:6433',
      'record -> room:50051',
    ]);
    expect(of('external-url').find('NetworkPolicy', `${FULLNAME}-record-egress`)).toBeUndefined();
  });
});

describe('NetworkPolicies', () => {
  const EXPECTED = [
    'anyone -> envoy:8080',
    'envoy -> edge:8080',
    'envoy -> edge:9090',
    'test -> edge:9090',
    'prometheus -> edge:9090',
    'envoy -> auth:8081',
    'envoy -> auth:9090',
    'edge -> auth:50053',
    'test -> auth:9090',
    'prometheus -> auth:9090',
    'edge -> room:50051',
    'auth -> room:50051',
    'messaging -> room:50051',
    'delivery -> room:50051',
    'prometheus -> room:9090',
    'edge -> messaging:50052',
    'delivery -> messaging:50052',
    'auth -> messaging:50052',
    'prometheus -> messaging:9090',
    'edge -> delivery:50054',
    'auth -> delivery:50054',
    'prometheus -> delivery:9090',
    'record -> room:50051',
    'edge -> record:50055',
    'auth -> record:50055',
    'test -> record:9090',
    'prometheus -> record:9090',
    'record -> postgresql:5432',
    'room -> redis:6379',
    'messaging -> redis:6379',
    'delivery -> redis:6379',
    'auth -> redis:6379',
    'edge -> redis:6379',
  ];

  it('admit exactly the flows the services need, and nothing else', () => {
    expect(flows(of('defaults'))).toEqual([...EXPECTED].sort());
  });

  it('the gRPC flows are exactly the calls the services are configured to make', () => {
    const r = of('defaults');
    const calls = WORKLOADS.flatMap((svc) =>
      r
        .deployment(svc)
        .spec.template.spec.containers[0]!.env.filter((v) => /^(ROOM|AUTH|MESSAGING|DELIVERY|RECORD)_ADDR$/.test(v.name))
        .map((v) => `${svc} -> ${v.name.replace('_ADDR', '').toLowerCase()}:${dialTarget(v.value!)[1]}`),
    );
    const grpcFlows = flows(r).filter((f) => /:5005\d$/.test(f));
    expect(grpcFlows).toEqual(calls.sort());
  });

  it('with envoyFrom, only those peers (and the helm test) reach Envoy; without the bundled Redis and PostgreSQL, no policy for them', () => {
    const f = flows(of('external-secret'));
    expect(f.filter((x) => x.endsWith('envoy:8080'))).toEqual(['namespace ingress-nginx -> envoy:8080', 'test -> envoy:8080']);
    expect(f.filter((x) => x.includes('redis'))).toEqual([]);
    expect(f.filter((x) => x.includes('postgresql'))).toEqual([]);
    expect(of('external-url').all('NetworkPolicy')).toEqual([]);
  });

  it('the helm test pod reaches what it checks', () => {
    const r = of('defaults');
    const pod = r.get(z.object({ metadata, spec: podSpec }), 'Pod', `${FULLNAME}-test`);
    expect(pod.metadata.annotations['helm.sh/hook']).toBe('test');
    const urls = pod.spec.containers[0]!.args.filter((a) => a.startsWith('http://'));
    expect(urls).toEqual([
      `http://${FULLNAME}-edge:9090/readyz`,
      `http://${FULLNAME}-auth:9090/readyz`,
      `http://${FULLNAME}-record-headless:9090/readyz`,
      `http://${FULLNAME}-envoy:80/.well-known/ai-agent.json`,
    ]);
    const f = flows(r);
    for (const url of urls) {
      const { hostname, port } = new URL(url);
      const target = r.services().find((s) => s.metadata.name === hostname)!;
      const component = target.spec.selector[COMPONENT]!;
      // URL leaves out the scheme's default port (80).
      const servicePort = target.spec.ports.find((p) => p.port === Number(port || '80'));
      expect(servicePort, url).toBeDefined();
      const podPort = r.port(component, servicePort!.targetPort);
      expect(
        f.some((x) => x === `test -> ${component}:${podPort}` || x === `anyone -> ${component}:${podPort}`),
        url,
      ).toBe(true);
    }
  });
});

// ---------------------------------------------------------------------------------------------

describe('Tracing', () => {
  const bootstrapOf = (r: Rendered): string => r.get(configMap, 'ConfigMap', `${FULLNAME}-envoy`).data['envoy.yaml']!;
  const otelOf = (r: Rendered, component: string): Record<string, string> =>
    Object.fromEntries(
      r
        .deployment(component)
        .spec.template.spec.containers[0]!.env.filter((v) => v.name.startsWith('OTEL_'))
        .map((v) => [v.name, v.value ?? '']),
    );

  it('is off by default: no OTEL_* variable in any pod, and Envoy without its tracer', () => {
    for (const name of ['defaults', 'external-url', 'external-secret', 'bundled-own-secret']) {
      const r = of(name);
      for (const w of r.workloads().values()) {
        for (const c of [...w.spec.template.spec.containers, ...w.spec.template.spec.initContainers]) {
          expect(
            c.env.filter((v) => v.name.startsWith('OTEL_')).map((v) => v.name),
            `${name}: ${c.name}`,
          ).toEqual([]);
        }
      }
      expect(bootstrapOf(r), name).not.toContain('envoy.tracers.opentelemetry');
    }
  });

  it('on, every service exports spans over OTLP/HTTP to the receiver, sampling at the ratio of tracing.sampling after its parent', () => {
    const r = of('tracing');
    for (const svc of SERVICES) {
      expect(otelOf(r, svc), svc).toEqual({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel-collector.observability.svc:4318',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.25',
        OTEL_RESOURCE_ATTRIBUTES: `k8s.namespace.name=${NAMESPACE},deployment.environment.name=staging`,
      });
    }
  });

  it("on, Envoy's bootstrap is the chart's traced one, sending to the same receiver and sampling the same share of requests", async () => {
    const r = of('tracing');
    // What Envoy does with the variables the services get is what the ConfigMap rendered: sampling is set in one place.
    const expected = envoyTracing(tracingEnv.parse(otelOf(r, 'edge')));
    expect(expected).toEqual({
      protocol: 'http/protobuf',
      host: 'otel-collector.observability.svc',
      port: 4318,
      tracesUrl: 'http://otel-collector.observability.svc:4318/v1/traces',
      samplingPerMillion: 250_000,
    });
    const file = await readFile(join(root, CHART_ENVOY_TRACING_FILE), 'utf8');
    expect(bootstrapOf(r)).toBe(
      `${fillChartPlaceholders(file, {
        edgeHost: `${FULLNAME}-edge`,
        authHost: `${FULLNAME}-auth`,
        quotaLimit: 5_000,
        trustedProxyHops: 0,
        otlp: { host: expected!.host, port: Number(expected!.port), tracesUrl: expected!.tracesUrl, samplingPerMillion: Number(expected!.samplingPerMillion) },
      }).trimEnd()}\n`,
    );
    // A receiver without a port is on 80; a ratio becomes Envoy's percentage without rounding noise.
    const other = await render('tracing-other', { tracing: { enabled: true, otlpEndpoint: 'http://10.1.2.3', sampling: 0.1 } });
    const traced = bootstrapOf(other);
    expect(traced).toContain('uri: http://10.1.2.3/v1/traces');
    expect(traced).toContain('socket_address: { address: 10.1.2.3, port_value: 80 }');
    expect(traced).toContain('sampling_percentage: { numerator: 100000, denominator: MILLION }');
    expect(otelOf(other, 'room').OTEL_TRACES_SAMPLER_ARG).toBe('0.1');
    // A new sampling rolls Envoy, whose bootstrap it changes.
    const checksum = (x: Rendered) => x.deployment('envoy').spec.template.metadata.annotations['checksum/config'];
    expect(checksum(other)).not.toBe(checksum(r));
  });

  it("on, the egress NetworkPolicies let auth, delivery and the record reach the receiver's port", () => {
    for (const svc of ['auth', 'delivery', 'record']) {
      expect(egressFlows(of('tracing'), svc), svc).toContain(`${svc} -> any:4318`);
      expect(
        egressFlows(of('defaults'), svc).filter((flow) => flow.endsWith(':4318')),
        svc,
      ).toEqual([]);
    }
  });

  it('refuses a receiver Envoy cannot reach (HTTPS, not a URL) and a sampling ratio outside 0..1', async () => {
    expect(await renderFails(['--set', 'tracing.otlpEndpoint=https://collector:4318'])).toContain('/tracing/otlpEndpoint');
    expect(await renderFails(['--set', 'tracing.otlpEndpoint=collector:4318'])).toContain('/tracing/otlpEndpoint');
    expect(await renderFails(['--set', 'tracing.sampling=2'])).toContain('/tracing/sampling');
    expect(await renderFails(['--set-json', 'tracing.sampling=-0.5'])).toContain('/tracing/sampling');
    expect(await renderFails(['--set', 'tracing.sampling=0.5x'])).toContain('/tracing/sampling');
    // --set passes a ratio as a string: taken as the number it writes.
    const { stdout } = await run(goTool('helm'), [
      'template',
      RELEASE,
      chart,
      '--namespace',
      NAMESPACE,
      '--set',
      'tracing.enabled=true',
      '--set',
      'tracing.sampling=0.05',
      '--show-only',
      'templates/envoy-configmap.yaml',
    ]);
    expect(stdout).toContain('sampling_percentage: { numerator: 50000, denominator: MILLION }');
  });
});

// ---------------------------------------------------------------------------------------------

describe('ServiceMonitor', () => {
  it('scrapes /metrics on the admin port of exactly one Service per service, the record included', () => {
    expect(of('defaults').all('ServiceMonitor')).toEqual([]);
    const r = of('external-url');
    const monitor = r.get(serviceMonitor, 'ServiceMonitor', FULLNAME);
    expect(monitor.metadata.labels.release).toBe('kube-prometheus-stack');
    expect(monitor.spec.namespaceSelector.matchNames).toEqual([NAMESPACE]);
    expect(monitor.spec.endpoints).toEqual([expect.objectContaining({ port: 'admin', path: '/metrics' })]);
    const wanted = Object.entries(monitor.spec.selector.matchLabels ?? {});
    const selected = r.services().filter((s) => wanted.every(([k, v]) => s.metadata.labels[k] === v));
    expect(selected.map((s) => s.spec.selector[COMPONENT]).sort()).toEqual(['auth', 'delivery', 'edge', 'messaging', 'record', 'room']);
    for (const s of selected) expect(r.port(s.spec.selector[COMPONENT]!, s.spec.ports.find((p) => p.name === 'admin')!.targetPort)).toBe(9090);
  });
});

// ---------------------------------------------------------------------------------------------

describe('chart README', () => {
  const readmeScript = join(root, 'scripts/chart-readme.mjs');

  it('the committed parameter tables are what npm run chart:readme writes from values.yaml', async () => {
    await run(process.execPath, [readmeScript, '--check'], { cwd: root });
  });

  it('the check fails on a changed description and on a value without a @param', async () => {
    const copy = join(work, 'readme-copy');
    await cp(chart, copy, { recursive: true });
    const values = await readFile(join(copy, 'values.yaml'), 'utf8');
    await writeFile(
      join(copy, 'values.yaml'),
      values.replace('## @param room.replicas Replicas when autoscaling is off', '## @param room.replicas How many room pods'),
    );
    await expect(run(process.execPath, [readmeScript, '--check', '--chart', copy])).rejects.toMatchObject({
      stderr: expect.stringContaining('run npm run chart:readme'),
    });
    await writeFile(join(copy, 'values.yaml'), `${values}\nundocumented: 1\n`);
    await expect(run(process.execPath, [readmeScript, '--check', '--chart', copy])).rejects.toMatchObject({
      stderr: expect.stringContaining('undocumented has no @param'),
    });
  });
});
