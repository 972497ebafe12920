import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type PublicUrls, publicUrls } from '@agentroom/kit/config';
import { cacheControlOf, etagOf, negotiateCoding, staticAsset, uncountedQuota } from '@agentroom/kit/http';
import { freePort } from '@agentroom/kit/local';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { expectCompressedAsset, expectUncompressedAsset, NEGOTIATIONS, rawRequest } from '../../e2e/support/compression.js';
import { discoveryDocuments, type ServedDocument } from '../src/discovery.js';
import { DOCUMENT_INDEX, documentFileName, writeDocuments } from '../src/document-files.js';
import {
  CHART_DOCS_DIR,
  CHART_ENVOY_FILE,
  CHART_ENVOY_TRACING_FILE,
  chartEnvoyYaml,
  envoyBootstrap,
  envoyYaml,
  fillChartPlaceholders,
  type EnvoyTracing,
  type Json,
} from '../src/envoy.js';
import { startJaeger } from '../../e2e/support/jaeger.js';
import { envoyTracing, tracingEnv } from '../src/tracing.js';
import { resolveRoutes } from '../src/routes.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const ENVOY = join(root, '.venv/bin/envoy');

function envoyBin(): string {
  if (!existsSync(ENVOY)) throw new Error(`${ENVOY} is missing: install it with \`bash scripts/install-python-tools.sh\``);
  return ENVOY;
}

/**
 * Envoy's own verdict on a bootstrap: loads every listener, cluster, route and document file, starts
 * nothing. A field Envoy is about to drop fails too, so the bootstrap keeps up with Envoy's releases.
 */
function validate(file: string): void {
  const result = spawnSync(envoyBin(), ['--mode', 'validate', '-c', file, '--log-level', 'warn', '--disable-hot-restart'], { encoding: 'utf8' });
  const said = `envoy --mode validate -c ${file}:\n${result.stdout}\n${result.stderr}`;
  expect(result.status, said).toBe(0);
  expect(`${result.stdout}${result.stderr}`, said).not.toMatch(/deprecated/i);
}

interface RouteEntry {
  name: string;
  match: { path?: string; prefix?: string; headers?: unknown[] };
  route?: { cluster: string; timeout: string; idle_timeout?: string };
  direct_response?: unknown;
  typed_per_filter_config?: Record<string, { name?: string }>;
}

interface VirtualHost {
  name: string;
  domains: string[];
  routes: RouteEntry[];
}

type Bootstrap = {
  static_resources: {
    listeners: { filter_chains: { filters: { typed_config: { route_config: { virtual_hosts: VirtualHost[] } } }[] }[] }[];
    clusters: {
      name: string;
      type: string;
      load_assignment: {
        endpoints: {
          lb_endpoints: { endpoint: { address: { socket_address: { address: string; port_value: number } }; health_check_config: { port_value: number } } }[];
        }[];
      };
    }[];
  };
  admin: { address: { socket_address: { address: string; port_value: number } } };
};

function virtualHostsOf(bootstrap: Json | Bootstrap): VirtualHost[] {
  return (bootstrap as Bootstrap).static_resources.listeners[0]!.filter_chains[0]!.filters[0]!.typed_config.route_config.virtual_hosts;
}

/** Whether a route's answers are the gateway's documents, which the documents' Lua filter serves. */
function documentsRoute(entry: RouteEntry | undefined): boolean {
  return entry?.typed_per_filter_config?.['agent-room.documents']?.name === 'documents';
}

/**
 * Every route of the table, placed at `urls`, is in the bootstrap: a service's route forwards to its
 * cluster (streams without a deadline); a gateway route is one route, whose documents the Lua filter
 * answers and whose other paths go to edge. No route names a document, nor answers one itself.
 */
function expectEveryRoute(bootstrap: Json | Bootstrap, urls: PublicUrls): void {
  const hosts = virtualHostsOf(bootstrap);
  const resolved = resolveRoutes(urls);
  for (const route of resolved) {
    const vhost = hosts.find((candidate) => candidate.domains.includes(route.host ?? '*'));
    expect(vhost, `a virtual host for ${route.host ?? 'every host'}`).toBeDefined();
    const key = route.match === 'exact' ? 'path' : 'prefix';
    const entry = vhost!.routes.find((candidate) => candidate.match[key] === route.path && candidate.route !== undefined);
    expect(documentsRoute(entry), `${route.upstream} ${route.path}`).toBe(route.upstream === 'gateway');
    expect(entry?.route?.cluster, `${route.upstream} ${route.path}`).toBe(route.upstream === 'gateway' ? 'edge' : route.upstream);
    if (route.streaming) expect(entry?.route).toMatchObject({ timeout: '0s', idle_timeout: '360s' });
    else expect(entry?.route?.timeout).toBe('30s');
  }
  for (const vhost of hosts) {
    // The catch-all, last on every host: edge answers the 404 problem.
    expect(vhost.routes.at(-1)).toMatchObject({ match: { prefix: '/' }, route: { cluster: 'edge' } });
    expect(vhost.routes.filter((entry) => entry.direct_response !== undefined || entry.match.headers !== undefined)).toEqual([]);
  }
}

const scratch = mkdtempSync(join(tmpdir(), 'envoy-test-'));

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('the Envoy bootstrap', () => {
  it('renders, for one origin with edge replicas, a bootstrap Envoy accepts, with every route of the table', async () => {
    const urls = publicUrls({ PORT: 8080, SITE_URL: undefined, API_URL: undefined });
    const documents = discoveryDocuments(urls);
    const docsDir = join(scratch, 'local-docs');
    await writeDocuments(urls, documents, docsDir);
    const bootstrap = envoyBootstrap({
      urls,
      docsDir,
      listen: { address: '127.0.0.1', port: 8080 },
      admin: { address: '127.0.0.1', port: 9901 },
      edge: [
        { host: '127.0.0.1', port: 8081, healthCheckPort: 9091 },
        { host: '127.0.0.1', port: 8082, healthCheckPort: 9092 },
      ],
      auth: [{ host: '127.0.0.1', port: 8083, healthCheckPort: 9093 }],
    });
    const file = join(scratch, 'local.yaml');
    writeFileSync(file, envoyYaml(bootstrap, 'local form'));
    validate(file);
    expect(virtualHostsOf(bootstrap).map((vhost) => vhost.domains)).toEqual([['*']]);
    expectEveryRoute(bootstrap, urls);
    const edge = (bootstrap as unknown as Bootstrap).static_resources.clusters.find((cluster) => cluster.name === 'edge');
    expect(edge?.type).toBe('STATIC');
    expect(
      edge?.load_assignment.endpoints[0]?.lb_endpoints.map(({ endpoint }) => [
        endpoint.address.socket_address.port_value,
        endpoint.health_check_config.port_value,
      ]),
    ).toEqual([
      [8081, 9091],
      [8082, 9092],
    ]);
  });

  it('places the routes on two virtual hosts when the site and the API live on different hosts', async () => {
    const urls: PublicUrls = { siteUrl: 'https://room.example', apiUrl: 'https://api.room.example', baseUrl: 'https://api.room.example/v1' };
    const documents = discoveryDocuments(urls);
    const docsDir = join(scratch, 'split-docs');
    await writeDocuments(urls, documents, docsDir);
    const bootstrap = envoyBootstrap({
      urls,
      docsDir,
      listen: { address: '0.0.0.0', port: 8080 },
      admin: { address: '127.0.0.1', port: 9901 },
      edge: [{ host: 'edge.internal', port: 8080, healthCheckPort: 9090 }],
      auth: [{ host: 'auth.internal', port: 8081, healthCheckPort: 9090 }],
    });
    const file = join(scratch, 'split.yaml');
    writeFileSync(file, envoyYaml(bootstrap, 'split form'));
    validate(file);
    const hosts = virtualHostsOf(bootstrap);
    expect(hosts.map((vhost) => vhost.domains)).toEqual([['room.example'], ['api.room.example'], ['*']]);
    expectEveryRoute(bootstrap, urls);
    // The REST API is on the API's host only; on the site's host, /v1/ goes to the catch-all.
    expect(hosts[1]!.routes.some((entry) => entry.match.prefix === '/v1/')).toBe(true);
    expect(hosts[0]!.routes.some((entry) => entry.match.prefix === '/v1/')).toBe(false);
    expect(hosts[0]!.routes.some((entry) => entry.match.path === '/.well-known/ai-agent.json')).toBe(true);
    expect((bootstrap as unknown as Bootstrap).static_resources.clusters.map((cluster) => cluster.type)).toEqual(['STRICT_DNS', 'STRICT_DNS']);
  });

  it("places RFC 8414's and RFC 9728's path-inserted metadata at each host's root, for a site and an API below paths on two hosts", async () => {
    const urls: PublicUrls = { siteUrl: 'https://room.example/room', apiUrl: 'https://api.room.example/agents', baseUrl: 'https://api.room.example/agents/v1' };
    const documents = discoveryDocuments(urls);
    const docsDir = join(scratch, 'prefixed-docs');
    await writeDocuments(urls, documents, docsDir);
    const bootstrap = envoyBootstrap({
      urls,
      docsDir,
      listen: { address: '0.0.0.0', port: 8080 },
      admin: { address: '127.0.0.1', port: 9901 },
      edge: [{ host: 'edge.internal', port: 8080, healthCheckPort: 9090 }],
      auth: [{ host: 'auth.internal', port: 8081, healthCheckPort: 9090 }],
    });
    const file = join(scratch, 'prefixed.yaml');
    writeFileSync(file, envoyYaml(bootstrap, 'prefixed form'));
    validate(file);
    expectEveryRoute(bootstrap, urls);
    const [site, api] = virtualHostsOf(bootstrap);
    const documentsAt = (vhost: VirtualHost, path: string): boolean => documentsRoute(vhost.routes.find((entry) => entry.match.path === path));
    expect(documentsAt(site!, '/.well-known/oauth-authorization-server/room')).toBe(true);
    expect(documentsAt(site!, '/room/.well-known/oauth-authorization-server')).toBe(true);
    expect(documentsAt(site!, '/room/.well-known/oauth-protected-resource/agents/mcp')).toBe(true);
    expect(documentsAt(api!, '/.well-known/oauth-protected-resource/agents/mcp')).toBe(true);
    expect(documentsAt(api!, '/.well-known/oauth-authorization-server/room')).toBe(false);
    expect(site!.routes.find((entry) => entry.match.path === '/room/authorize')?.route?.cluster).toBe('auth');
    // Each of those paths has its document in the files Envoy serves, named as the index says.
    const index = readFileSync(join(docsDir, DOCUMENT_INDEX), 'utf8');
    for (const path of [
      '/.well-known/oauth-authorization-server/room',
      '/room/.well-known/oauth-authorization-server',
      '/.well-known/oauth-protected-resource/agents/mcp',
    ]) {
      expect(readFileSync(join(docsDir, documentFileName(urls, path))).equals(documents.get(path)!.body), path).toBe(true);
      expect(index).toContain(`["${path}"] = {`);
    }
  });

  it("keeps the chart's bootstrap as a fresh rendering makes it, and Envoy accepts it with the documents the pod writes, not without", async () => {
    const committed = join(root, CHART_ENVOY_FILE);
    const fresh = chartEnvoyYaml();
    expect(existsSync(committed), `${CHART_ENVOY_FILE} is missing: run \`npm run render:envoy\``).toBe(true);
    expect(
      readFileSync(committed, 'utf8') === fresh,
      `${CHART_ENVOY_FILE} differs from a fresh rendering of the route table: run \`npm run render:envoy\` and commit the result`,
    ).toBe(true);

    const bootstrap = parse(fresh) as Bootstrap;
    expect(bootstrap.admin.address.socket_address).toEqual({ address: '0.0.0.0', port_value: 9901 });
    const endpoints = Object.fromEntries(
      bootstrap.static_resources.clusters.map((cluster) => [
        cluster.name,
        [
          cluster.type,
          cluster.load_assignment.endpoints[0]!.lb_endpoints.map(({ endpoint }) => [endpoint.address.socket_address, endpoint.health_check_config.port_value]),
        ],
      ]),
    );
    expect(endpoints).toEqual({
      edge: ['STRICT_DNS', [[{ address: '__EDGE_HOST__', port_value: 8080 }, 9090]]],
      auth: ['STRICT_DNS', [[{ address: '__AUTH_HOST__', port_value: 8081 }, 9090]]],
    });
    const urls = publicUrls({ PORT: 8080, SITE_URL: undefined, API_URL: undefined });
    expectEveryRoute(bootstrap, urls);
    // Nothing of any document: no problem type, no digest.
    const documents = discoveryDocuments(urls);
    for (const [path, document] of documents) {
      if (path.startsWith('/problems/')) expect(fresh, path).not.toContain(path);
      expect(fresh, path).not.toContain(document.asset.digest);
    }

    // Validated as the pod has it: the documents where the init container writes them (here, a temporary directory).
    const docsDir = join(scratch, 'chart-docs');
    const file = join(scratch, 'chart.yaml');
    writeFileSync(
      file,
      fillChartPlaceholders(fresh, { edgeHost: 'edge.example', authHost: 'auth.example', quotaLimit: 5_000, trustedProxyHops: 1 }).replaceAll(
        CHART_DOCS_DIR,
        docsDir,
      ),
    );
    // Without them, Envoy refuses it: a pod never serves without its documents.
    const refused = spawnSync(envoyBin(), ['--mode', 'validate', '-c', file, '--log-level', 'warn', '--disable-hot-restart'], { encoding: 'utf8' });
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toContain("the gateway's documents are missing");
    await writeDocuments(urls, documents, docsDir);
    validate(file);
  });
});

describe("the chart's bootstrap with Envoy's tracer", () => {
  type Traced = Bootstrap & {
    static_resources: {
      listeners: {
        filter_chains: {
          filters: {
            typed_config: { tracing?: Record<string, unknown>; access_log: { typed_config: { log_format: { json_format: Record<string, unknown> } } }[] };
          }[];
        }[];
      }[];
    };
  };
  const hcmOf = (bootstrap: Traced) => bootstrap.static_resources.listeners[0]!.filter_chains[0]!.filters[0]!.typed_config;

  it('is a fresh rendering too, and differs from the untraced one by the tracer, its receiver and the trace id in the access log alone', () => {
    const committed = join(root, CHART_ENVOY_TRACING_FILE);
    const fresh = chartEnvoyYaml(true);
    expect(existsSync(committed), `${CHART_ENVOY_TRACING_FILE} is missing: run \`npm run render:envoy\``).toBe(true);
    expect(
      readFileSync(committed, 'utf8') === fresh,
      `${CHART_ENVOY_TRACING_FILE} differs from a fresh rendering of the route table: run \`npm run render:envoy\` and commit the result`,
    ).toBe(true);

    const traced = parse(fresh) as Traced;
    const plain = parse(chartEnvoyYaml()) as Traced;
    const hcm = hcmOf(traced);
    expect(hcm.tracing).toEqual({
      provider: {
        name: 'envoy.tracers.opentelemetry',
        typed_config: {
          '@type': 'type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig',
          service_name: 'envoy',
          http_service: { http_uri: { uri: '__OTLP_TRACES_URL__', cluster: 'otlp', timeout: '5s' } },
          // As the services' parentbased_traceidratio: a parent's decision, else the trace id against the ratio.
          sampler: {
            name: 'envoy.tracers.opentelemetry.samplers.parent_based',
            typed_config: {
              '@type': 'type.googleapis.com/envoy.extensions.tracers.opentelemetry.samplers.v3.ParentBasedSamplerConfig',
              wrapped_sampler: {
                name: 'envoy.tracers.opentelemetry.samplers.trace_id_ratio_based',
                typed_config: {
                  '@type': 'type.googleapis.com/envoy.extensions.tracers.opentelemetry.samplers.v3.TraceIdRatioBasedSamplerConfig',
                  sampling_percentage: { numerator: '__TRACING_SAMPLING_PER_MILLION__', denominator: 'MILLION' },
                },
              },
            },
          },
        },
      },
      spawn_upstream_span: true,
      custom_tags: [{ tag: 'http.request.header.x-request-id', request_header: { name: 'x-request-id' } }],
    });
    expect(hcm.access_log[0]!.typed_config.log_format.json_format.traceId).toBe('%TRACE_ID%');
    expect(traced.static_resources.clusters.map((cluster) => cluster.name)).toEqual(['edge', 'auth', 'otlp']);
    expect(traced.static_resources.clusters[2]!.load_assignment.endpoints[0]!.lb_endpoints[0]!.endpoint.address.socket_address).toEqual({
      address: '__OTLP_HOST__',
      port_value: '__OTLP_PORT__',
    });
    // Nothing else: without those, the two are the same bootstrap.
    delete hcm.tracing;
    delete hcm.access_log[0]!.typed_config.log_format.json_format.traceId;
    traced.static_resources.clusters.pop();
    expect(traced).toEqual(plain);
    expect(hcmOf(plain).tracing).toBeUndefined();
  });

  it('is accepted by Envoy once the ConfigMap has filled its receiver and sampling', async () => {
    const urls = publicUrls({ PORT: 8080, SITE_URL: undefined, API_URL: undefined });
    const docsDir = join(scratch, 'chart-traced-docs');
    await writeDocuments(urls, discoveryDocuments(urls), docsDir);
    const file = join(scratch, 'chart-traced.yaml');
    const filled = fillChartPlaceholders(chartEnvoyYaml(true), {
      edgeHost: 'edge.example',
      authHost: 'auth.example',
      quotaLimit: 5_000,
      trustedProxyHops: 0,
      otlp: { host: 'collector.observability', port: 4318, tracesUrl: 'http://collector.observability:4318/v1/traces', samplingPerMillion: 125_000 },
    }).replaceAll(CHART_DOCS_DIR, docsDir);
    expect(filled).not.toMatch(/__[A-Z_]+__/);
    writeFileSync(file, filled);
    validate(file);
  });
});

describe('render.js', () => {
  const render = join(root, 'gateway/dist/render.js');
  const run = (args: string[], env: Record<string, string> = {}) =>
    spawnSync(process.execPath, [render, ...args], { encoding: 'utf8', env: { ...process.env, ...env } });

  it('writes the documents and a bootstrap that refers to them, which Envoy accepts', () => {
    const docsDir = join(scratch, 'cli-docs');
    const env = { SITE_URL: 'https://room.example', API_URL: 'https://room.example/api' };
    const docs = run(['docs', '--out', docsDir], env);
    expect(docs.status, docs.stderr).toBe(0);
    const urls = publicUrls({ PORT: 8080, ...env });
    for (const [path, document] of discoveryDocuments(urls)) {
      expect(readFileSync(join(docsDir, documentFileName(urls, path))).equals(document.body), path).toBe(true);
      // The compressed forms of a document sent compressed, the ones the router sends.
      expect(existsSync(join(docsDir, `${documentFileName(urls, path)}.br`)), path).toBe(document.asset.compressed !== undefined);
      if (document.asset.compressed)
        expect(readFileSync(join(docsDir, `${documentFileName(urls, path)}.gz`)).equals(document.asset.compressed.gzip), path).toBe(true);
    }
    expect(existsSync(join(docsDir, DOCUMENT_INDEX))).toBe(true);

    const file = join(scratch, 'cli.yaml');
    const envoy = run(
      [
        'envoy',
        '--out',
        file,
        '--docs-dir',
        docsDir,
        '--edge',
        '127.0.0.1:8081:9091,127.0.0.1:8082:9092',
        '--auth',
        'auth.internal:8081',
        '--admin-port',
        '19901',
      ],
      env,
    );
    expect(envoy.status, envoy.stderr).toBe(0);
    validate(file);
    const bootstrap = parse(readFileSync(file, 'utf8')) as Bootstrap;
    expectEveryRoute(bootstrap, urls);
    expect(
      bootstrap.static_resources.clusters.find((cluster) => cluster.name === 'auth')?.load_assignment.endpoints[0]?.lb_endpoints[0]?.endpoint
        .health_check_config.port_value,
    ).toBe(9090);
  });

  it("renders Envoy's tracer when the OTEL_* variables say the services export spans, and none otherwise", () => {
    const docsDir = join(scratch, 'cli-docs');
    const env = { SITE_URL: 'https://room.example', API_URL: 'https://room.example/api' };
    const args = (file: string) => ['envoy', '--out', file, '--docs-dir', docsDir, '--edge', '127.0.0.1:8081', '--auth', '127.0.0.1:8082'];
    expect(run(['docs', '--out', docsDir], env).status).toBe(0);
    const tracingOf = (file: string) =>
      (parse(readFileSync(file, 'utf8')) as { static_resources: { listeners: { filter_chains: { filters: { typed_config: { tracing?: unknown } }[] }[] }[] } })
        .static_resources.listeners[0]!.filter_chains[0]!.filters[0]!.typed_config.tracing;

    const plain = join(scratch, 'cli-untraced.yaml');
    expect(run(args(plain), env).status).toBe(0);
    expect(tracingOf(plain)).toBeUndefined();

    const traced = join(scratch, 'cli-traced.yaml');
    const rendered = run(args(traced), {
      ...env,
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.25',
    });
    expect(rendered.status, rendered.stderr).toBe(0);
    validate(traced);
    expect(tracingOf(traced)).toMatchObject({
      provider: {
        typed_config: {
          service_name: 'envoy',
          http_service: { http_uri: { uri: 'http://127.0.0.1:4318/v1/traces', cluster: 'otlp' } },
          sampler: { typed_config: { wrapped_sampler: { typed_config: { sampling_percentage: { numerator: 250_000, denominator: 'MILLION' } } } } },
        },
      },
    });
  });

  /** render.js's exit status and first line on stderr; the four runs below go at once, each a Node start. */
  const refusal = (args: string[]): Promise<[number | null, string | undefined]> =>
    new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [render, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
      child.once('error', reject);
      child.once('close', (status) => resolve([status, stderr.split('\n')[0]]));
    });

  it('refuses bad arguments with one clear line and exit status 2', async () => {
    const [unknown, endpoint, command, missing] = await Promise.all([
      refusal(['envoy', '--out', join(scratch, 'x.yaml'), '--docs-dir', scratch, '--edge', '127.0.0.1:1', '--auth', '127.0.0.1:2', '--colour']),
      refusal(['envoy', '--out', join(scratch, 'x.yaml'), '--docs-dir', scratch, '--edge', 'edge', '--auth', '127.0.0.1:2']),
      refusal(['deploy']),
      refusal(['docs']),
    ]);
    expect(unknown).toEqual([2, expect.stringMatching(/^render: .*--colour/)]);
    expect(endpoint).toEqual([2, 'render: --edge "edge": expected HOST:PORT or HOST:PORT:HEALTH_PORT, ports from 1 to 65535']);
    expect(command).toEqual([2, 'render: unknown command "deploy": expected docs, envoy or chart']);
    expect(missing).toEqual([2, 'render: --out is required: the directory to write the documents to']);
  });
});

interface RunningEnvoy {
  origin: string;
  urls: PublicUrls;
  process: ChildProcess;
  stop: () => Promise<void>;
}

/** Runs Envoy on a bootstrap file, live once its admin interface says it is ready. */
async function runEnvoy(file: string, port: number, adminPort: number, urls: PublicUrls): Promise<RunningEnvoy> {
  const child = spawn(envoyBin(), ['-c', file, '--disable-hot-restart', '--log-level', 'error', '--concurrency', '1'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`envoy exited with ${child.exitCode}: ${stderr}`);
    const ready = await fetch(`http://127.0.0.1:${adminPort}/ready`).catch(() => undefined);
    if (ready?.status === 200) break;
    if (Date.now() > deadline) throw new Error(`envoy not ready in 15 s: ${stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  };
  return { origin: `http://127.0.0.1:${port}`, urls, process: child, stop };
}

/** A real Envoy on the rendered bootstrap, in front of upstreams that are down. */
async function startEnvoy(name: string, rateLimit?: { perSecond: number; burst: number }, tracing?: EnvoyTracing): Promise<RunningEnvoy> {
  const [port, adminPort, edgePort, authPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const urls = publicUrls({ PORT: port, SITE_URL: undefined, API_URL: undefined });
  const docsDir = join(scratch, `${name}-docs`);
  await writeDocuments(urls, discoveryDocuments(urls), docsDir);
  const file = join(scratch, `${name}.yaml`);
  const down = (upstream: number) => [{ host: '127.0.0.1', port: upstream, healthCheckPort: upstream }];
  writeFileSync(
    file,
    envoyYaml(
      envoyBootstrap({
        urls,
        docsDir,
        listen: { address: '127.0.0.1', port },
        admin: { address: '127.0.0.1', port: adminPort },
        edge: down(edgePort),
        auth: down(authPort),
        ...(rateLimit ? { rateLimit } : {}),
        ...(tracing ? { tracing } : {}),
      }),
      name,
    ),
  );
  return runEnvoy(file, port, adminPort, urls);
}

/** The headers every answer Envoy makes itself carries: a request id and a full daily allowance. */
function expectOwnHeaders(response: Response, limit = 5_000): void {
  expect(response.headers.get('x-request-id')).toMatch(/^[A-Za-z0-9._:-]{1,128}$/);
  expect(response.headers.get('ratelimit-limit')).toBe(String(limit));
  expect(response.headers.get('ratelimit-remaining')).toBe(String(limit));
  expect(Math.abs(Number(response.headers.get('ratelimit-reset')) - uncountedQuota(limit).resetSeconds)).toBeLessThanOrEqual(2);
}

describe('Envoy on the rendered bootstrap', () => {
  let envoy: Awaited<ReturnType<typeof startEnvoy>>;

  beforeAll(async () => {
    envoy = await startEnvoy('running');
  });

  afterAll(() => envoy?.stop());

  it("answers the documents itself with the router's headers: GET, HEAD, the preflight, and 405 otherwise", async () => {
    const documents = discoveryDocuments(envoy.urls);
    for (const path of [
      '/openapi.json',
      '/developers',
      '/developers/reference',
      '/problems/not-found',
      '/developers/assets/scalar.js',
      '/.well-known/oauth-authorization-server',
      '/.well-known/oauth-protected-resource/api/mcp',
    ]) {
      const document = documents.get(path)!;
      const response = await fetch(`${envoy.origin}${path}`);
      expect(response.status, path).toBe(200);
      expect(Buffer.from(await response.arrayBuffer()).equals(document.body), path).toBe(true);
      expect(response.headers.get('content-type')).toBe(document.contentType);
      expect(response.headers.get('cache-control')).toBe(cacheControlOf(document.asset.cache));
      expect(response.headers.get('x-content-type-options')).toBe('nosniff');
      expect(response.headers.get('access-control-allow-origin')).toBe('*');
      for (const [name, value] of Object.entries(document.headers ?? {})) expect(response.headers.get(name), `${path} ${name}`).toBe(value);
      expect(response.headers.get('server')).toBeNull();
      expectOwnHeaders(response);
    }
    const head = await fetch(`${envoy.origin}/llms.txt`, { method: 'HEAD', headers: { 'accept-encoding': 'identity' } });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe(String(documents.get('/llms.txt')!.body.length));
    expect(await head.text()).toBe('');
    const preflight = await fetch(`${envoy.origin}/.well-known/ai-agent.json`, {
      method: 'OPTIONS',
      headers: { origin: 'https://elsewhere.example', 'access-control-request-method': 'GET' },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('allow')).toBe('GET, HEAD');
    expect(preflight.headers.get('access-control-allow-methods')).toBe('GET, HEAD, POST, DELETE');
    expectOwnHeaders(preflight);
    const refused = await fetch(`${envoy.origin}/openapi.json`, { method: 'POST', body: '{}' });
    expect(refused.status).toBe(405);
    expect(refused.headers.get('allow')).toBe('GET, HEAD');
    expect(refused.headers.get('content-type')).toBe('application/problem+json');
    expect(await refused.json()).toMatchObject({ status: 405, code: 'invalid_request', remedy: expect.stringContaining('/.well-known/ai-agent.json') });
    expectOwnHeaders(refused);
  });

  it('sends the documents compressed as the router does: Brotli or gzip by Accept-Encoding, ETag and 304, Vary, Cache-Control, HEAD as GET', async () => {
    const documents = discoveryDocuments(envoy.urls);
    for (const path of ['/openapi.json', '/llms.txt', '/developers'])
      await expectCompressedAsset(`${envoy.origin}${path}`, documents.get(path)!.body, 'public, no-cache');
    const scalar = documents.get('/developers/assets/scalar.js')!;
    await expectCompressedAsset(`${envoy.origin}/developers/assets/scalar.js?v=${scalar.asset.digest}`, scalar.body, 'public, max-age=31536000, immutable');
    // Kept a year only under its own digest, as the router does.
    await expectCompressedAsset(`${envoy.origin}/developers/assets/scalar.js?v=another`, scalar.body, 'public, no-cache');
    const css = documents.get('/assets/site.css')!;
    await expectCompressedAsset(`${envoy.origin}/assets/site.css?v=${css.asset.digest}`, css.body, 'public, max-age=31536000, immutable');
    await expectUncompressedAsset(`${envoy.origin}/problems/not-found`, documents.get('/problems/not-found')!.body, 'public, no-cache');
    // The 304 is Envoy's own answer: a request id and RateLimit headers, no Location.
    const first = await rawRequest(`${envoy.origin}/openapi.json`, { 'accept-encoding': 'gzip' });
    const again = await fetch(`${envoy.origin}/openapi.json`, { headers: { 'accept-encoding': 'gzip', 'if-none-match': first.headers.etag ?? '' } });
    expect(again.status).toBe(304);
    expect(again.headers.get('location')).toBeNull();
    expectOwnHeaders(again);
  });

  it("chooses each coding as the router's negotiateCoding does", async () => {
    const chosen: [string | undefined, string][] = [];
    for (const [accept] of NEGOTIATIONS) {
      const answer = await rawRequest(`${envoy.origin}/openapi.json`, accept === undefined ? {} : { 'accept-encoding': accept }, 'HEAD');
      chosen.push([accept, answer.headers['content-encoding'] ?? 'identity']);
    }
    expect(chosen).toEqual(NEGOTIATIONS.map(([accept]) => [accept, negotiateCoding(accept)]));
  });

  it('keeps a valid client request id, and replaces one the services would refuse', async () => {
    const kept = await fetch(`${envoy.origin}/llms.txt`, { headers: { 'x-request-id': 'agent-42:retry.1' } });
    expect(kept.headers.get('x-request-id')).toBe('agent-42:retry.1');
    for (const bad of ['has spaces', 'x'.repeat(129), 'semi;colon']) {
      const replaced = await fetch(`${envoy.origin}/llms.txt`, { headers: { 'x-request-id': bad } });
      expect(replaced.headers.get('x-request-id')).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    }
  });

  it('answers 503 problems with Retry-After when the services behind it are down, for reads and writes', async () => {
    for (const [method, path] of [
      ['GET', '/api/v1/posts'],
      ['POST', '/api/v1/posts'],
      ['GET', '/signin'],
      ['GET', '/problems/no-such-problem'],
    ] as const) {
      const response = await fetch(`${envoy.origin}${path}`, {
        method,
        ...(method === 'POST' ? { body: '{"text":"hello"}', headers: { 'content-type': 'application/json' } } : {}),
      });
      expect(response.status, `${method} ${path}`).toBe(503);
      expect(response.headers.get('content-type')).toBe('application/problem+json');
      expect(response.headers.get('retry-after')).toBe('5');
      expect(await response.json()).toMatchObject({ type: 'about:blank', status: 503, code: 'internal', retry_after: 5, remedy: expect.any(String) });
      expectOwnHeaders(response);
    }
  });

  it('refuses more than 16 KiB of request headers with a 431 problem', async () => {
    const response = await fetch(`${envoy.origin}/api/v1/posts`, { headers: { cookie: `c=${'a'.repeat(17 * 1024)}` } });
    expect(response.status).toBe(431);
    expect(response.headers.get('content-type')).toBe('application/problem+json');
    expect(await response.json()).toMatchObject({ status: 431, code: 'invalid_request', remedy: expect.stringContaining('16 KiB') });
    expectOwnHeaders(response);
  });
});

describe("Envoy's tracer, sending to a real Jaeger", () => {
  it('samples as the services do: none at ratio 0 but what a sampled traceparent asks for, every request at ratio 1', async () => {
    const jaeger = await startJaeger();
    const envoys: RunningEnvoy[] = [];
    try {
      const tracingAt = (ratio: string): EnvoyTracing =>
        envoyTracing(
          tracingEnv.parse({
            OTEL_EXPORTER_OTLP_ENDPOINT: jaeger.otlpEndpoint,
            OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
            OTEL_TRACES_SAMPLER_ARG: ratio,
          }),
        )!;
      const none = await startEnvoy('traced-none', undefined, tracingAt('0'));
      const all = await startEnvoy('traced-all', undefined, tracingAt('1'));
      envoys.push(none, all);
      const ask = (envoy: RunningEnvoy, id: string, traceparent?: string) =>
        fetch(`${envoy.origin}/.well-known/ai-agent.json`, { headers: { 'x-request-id': id, ...(traceparent ? { traceparent } : {}) } });
      const run = Date.now().toString(16);
      for (let i = 0; i < 10; i += 1) {
        expect((await ask(none, `none-${run}-${i}`)).status).toBe(200);
        expect((await ask(all, `all-${run}-${i}`)).status).toBe(200);
      }
      // A client's sampled trace is kept at ratio 0; its unsampled one is not at ratio 1.
      const kept = `${'1'.repeat(16)}${run.padStart(16, '0')}`;
      const dropped = `${'2'.repeat(16)}${run.padStart(16, '0')}`;
      await ask(none, `kept-${run}`, `00-${kept}-00f067aa0ba902b7-01`);
      await ask(all, `dropped-${run}`, `00-${dropped}-00f067aa0ba902b7-00`);

      // Envoy flushes its spans every 5 s: wait for the ten of ratio 1 and the client's, then look at all.
      const requestIds = async (): Promise<string[]> =>
        (await jaeger.traces('envoy', 100)).flatMap((trace) => trace.spans.map((span) => String(span.attributes['http.request.header.x-request-id'])));
      for (const deadline = Date.now() + 20_000; Date.now() < deadline; await new Promise((resolve) => setTimeout(resolve, 250))) {
        const ids = await requestIds();
        if (ids.filter((id) => id.startsWith(`all-${run}`)).length === 10 && ids.includes(`kept-${run}`)) break;
      }
      await new Promise((resolve) => setTimeout(resolve, 5_500));
      const ids = new Set(await requestIds());
      expect([...ids].filter((id) => id.startsWith(`all-${run}`)).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `all-${run}-${i}`).sort());
      expect([...ids].filter((id) => id.startsWith(`none-${run}`))).toEqual([]);
      expect(ids.has(`kept-${run}`)).toBe(true);
      expect(ids.has(`dropped-${run}`)).toBe(false);
      // Envoy's own span, named as the tracer names it, under the client's span and in its trace.
      const trace = await jaeger.trace(kept);
      expect(trace?.spans.map((span) => [span.service, span.name, span.parentSpanId])).toEqual([['envoy', 'ingress', '00f067aa0ba902b7']]);
    } finally {
      await Promise.all(envoys.map((envoy) => envoy.stop()));
      await jaeger.stop();
    }
  }, 60_000);
});

describe("Envoy's guard", () => {
  it('answers a 429 problem once its token bucket is spent', async () => {
    const envoy = await startEnvoy('guarded', { perSecond: 1, burst: 3 });
    try {
      const statuses: number[] = [];
      let refused: Response | undefined;
      for (let i = 0; i < 6; i += 1) {
        const response = await fetch(`${envoy.origin}/llms.txt`);
        statuses.push(response.status);
        if (response.status === 429) refused = response;
        else await response.arrayBuffer();
      }
      expect(statuses.slice(0, 3)).toEqual([200, 200, 200]);
      expect(statuses).toContain(429);
      expect(refused?.headers.get('content-type')).toBe('application/problem+json');
      expect(refused?.headers.get('retry-after')).toBe('1');
      expect(await refused?.json()).toMatchObject({ status: 429, code: 'rate_limited', retry_after: 1 });
      expectOwnHeaders(refused!);
    } finally {
      await envoy.stop();
    }
  });
});

/** A document as discovery.ts makes one: its bytes, compressed once by its type. */
function servedDocument(contentType: string, text: string): ServedDocument {
  const body = Buffer.from(text);
  return { contentType, body, asset: staticAsset(body, contentType) };
}

describe("Envoy on the chart's bootstrap", () => {
  it('serves a problem type added and a document changed after the bootstrap was rendered, from that same bootstrap (docs/decisions.md §31)', async () => {
    const committed = readFileSync(join(root, CHART_ENVOY_FILE), 'utf8');
    const [port, adminPort, edgePort, authPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
    const urls = publicUrls({ PORT: port, SITE_URL: undefined, API_URL: undefined });
    // What a new problem type and a new operation make: one page more, and another OpenAPI document.
    const documents = new Map(discoveryDocuments(urls));
    const added = servedDocument('text/html; charset=utf-8', '<!doctype html><title>A problem type added after the bootstrap</title>\n');
    documents.set('/problems/added-after-the-bootstrap', added);
    const openapi = JSON.parse(documents.get('/openapi.json')!.body.toString('utf8')) as { paths: Record<string, unknown> };
    openapi.paths['/added'] = {
      get: { operationId: 'addedAfterTheBootstrap', responses: { '200': { description: 'What an operation added later answers' } } },
    };
    const changed = servedDocument('application/json', `${JSON.stringify(openapi, null, 2)}\n`);
    documents.set('/openapi.json', changed);
    const docsDir = join(scratch, 'grown-docs');
    await writeDocuments(urls, documents, docsDir);

    // The committed file, byte for byte, as the ConfigMap fills it: only the addresses differ, to run here.
    expect(committed === chartEnvoyYaml(), `${CHART_ENVOY_FILE} differs from a fresh rendering`).toBe(true);
    const bootstrap = parse(
      fillChartPlaceholders(committed, { edgeHost: '127.0.0.1', authHost: '127.0.0.1', quotaLimit: 5_000, trustedProxyHops: 0 }).replaceAll(
        CHART_DOCS_DIR,
        docsDir,
      ),
    ) as Bootstrap;
    bootstrap.admin.address.socket_address = { address: '127.0.0.1', port_value: adminPort };
    const listener = bootstrap.static_resources.listeners[0] as unknown as { address: { socket_address: { address: string; port_value: number } } };
    listener.address.socket_address = { address: '127.0.0.1', port_value: port };
    for (const cluster of bootstrap.static_resources.clusters) {
      const down = cluster.name === 'edge' ? edgePort : authPort;
      for (const { endpoint } of cluster.load_assignment.endpoints[0]!.lb_endpoints) {
        endpoint.address.socket_address.port_value = down;
        endpoint.health_check_config.port_value = down;
      }
    }
    const file = join(scratch, 'grown.yaml');
    writeFileSync(file, envoyYaml(bootstrap as unknown as { [key: string]: Json }, 'the chart bootstrap, on free ports'));
    const envoy = await runEnvoy(file, port, adminPort, urls);
    try {
      const page = await rawRequest(`${envoy.origin}/problems/added-after-the-bootstrap`, { 'accept-encoding': 'br, gzip' });
      expect(page.status).toBe(200);
      expect(page.body.equals(added.body)).toBe(true);
      expect(page.headers).toMatchObject({
        'content-type': 'text/html; charset=utf-8',
        etag: etagOf(added.asset.digest, 'identity'),
        'cache-control': 'public, no-cache',
      });
      await expectUncompressedAsset(`${envoy.origin}/problems/added-after-the-bootstrap`, added.body, 'public, no-cache');
      await expectCompressedAsset(`${envoy.origin}/openapi.json`, changed.body, 'public, no-cache');
      expect((await rawRequest(`${envoy.origin}/openapi.json`, { 'accept-encoding': 'br' })).headers.etag).toBe(etagOf(changed.asset.digest, 'br'));
    } finally {
      await envoy.stop();
    }
  });
});
