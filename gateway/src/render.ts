// `node gateway/dist/render.js docs|envoy|chart`: writes what Envoy serves and how it is configured.
// In Kubernetes an init container runs `docs` (our image), so that the documents carry the
// deployment's own addresses; `chart` writes the chart's bootstrap, committed with the chart.
import './node-version.js';
import { mkdir, writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { loadConfigOrExit, port, publicUrls, publicUrlsEnv } from '@agentroom/kit/config';
import { z } from 'zod';
import { writeDocuments } from './document-files.js';
import { envoyTracing, tracingEnv } from './tracing.js';
import { CHART_ENVOY_FILE, CHART_ENVOY_TRACING_FILE, chartEnvoyYaml, type Endpoint, ENVOY_DEFAULTS, envoyBootstrap, envoyYaml } from './envoy.js';

const USAGE = `usage:
  render.js docs --out DIR
      every discovery document, one file each (and its compressed forms), with the index Envoy serves
      them by, for SITE_URL / API_URL (environment)
  render.js envoy --out FILE --docs-dir DIR --edge HOST:PORT[:HEALTH_PORT]... --auth HOST:PORT[:HEALTH_PORT]...
                  [--listen-address ADDR] [--listen-port N] [--admin-address ADDR] [--admin-port N]
                  [--health-port N] [--quota-limit N] [--rate-limit-per-second N] [--rate-limit-burst N]
                  [--trusted-hops N]
      an Envoy bootstrap for SITE_URL / API_URL, listening on PORT by default; endpoints repeat the flag or are comma-separated,
      each checked at GET /readyz on its HEALTH_PORT (default --health-port, 9090); --trusted-hops 1
      when an ingress controller or load balancer in front of Envoy appends the client's address;
      with Envoy's OpenTelemetry tracer when OTEL_EXPORTER_OTLP_ENDPOINT (or the other OTEL_*
      variables the services read) says they export spans, sampling as OTEL_TRACES_SAMPLER says
  render.js chart [--out FILE]
      the chart's bootstraps, ${CHART_ENVOY_FILE} and, beside it, the one with Envoy's tracer,
      ${basename(CHART_ENVOY_TRACING_FILE)} (what \`npm run render:envoy\` runs)`;

/** A wrong invocation: one line saying what, then the usage; exit status 2. */
class UsageError extends Error {}

const count = z.coerce.number().int().min(1).max(1_000_000_000);

/** `HOST:PORT[:HEALTH_PORT]`; a host name or an IPv4 address. */
function endpoint(value: string, healthPort: number, flag: string): Endpoint {
  const match = /^([A-Za-z0-9._-]+):(\d{1,5})(?::(\d{1,5}))?$/.exec(value.trim());
  const ports = match ? [match[2], match[3] ?? String(healthPort)].map((text) => port.safeParse(text)) : [];
  if (!match?.[1] || ports.some((parsed) => !parsed.success || parsed.data === 0)) {
    throw new UsageError(`${flag} ${JSON.stringify(value)}: expected HOST:PORT or HOST:PORT:HEALTH_PORT, ports from 1 to 65535`);
  }
  return { host: match[1], port: Number(match[2]), healthCheckPort: Number(match[3] ?? healthPort) };
}

function endpoints(values: string[] | undefined, healthPort: number, flag: string): Endpoint[] {
  const list = (values ?? []).flatMap((value) => value.split(',')).filter((value) => value.trim() !== '');
  if (list.length === 0) throw new UsageError(`${flag} is required: where the ${flag.slice(2)} processes listen, as HOST:PORT[:HEALTH_PORT]`);
  return list.map((value) => endpoint(value, healthPort, flag));
}

function numberOf<T extends z.ZodType<number>>(schema: T, value: string | undefined, flag: string, fallback: number): number {
  if (value === undefined) return fallback;
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new UsageError(`${flag} ${JSON.stringify(value)}: ${parsed.error.issues[0]?.message ?? 'not valid'}`);
  return parsed.data;
}

function required(value: string | undefined, flag: string, what: string): string {
  if (value === undefined || value === '') throw new UsageError(`${flag} is required: ${what}`);
  return value;
}

async function writeText(file: string, text: string): Promise<void> {
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, text);
}

async function main(argv: string[]): Promise<string> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h') {
    process.stdout.write(`${USAGE}\n`);
    return '';
  }
  if (command === 'chart') {
    const { values } = parseArgs({ args: rest, options: { out: { type: 'string' } }, strict: true, allowPositionals: false });
    const out = resolve(values.out ?? fileURLToPath(new URL(`../../${CHART_ENVOY_FILE}`, import.meta.url)));
    const traced = join(dirname(out), basename(CHART_ENVOY_TRACING_FILE));
    await writeText(out, chartEnvoyYaml());
    await writeText(traced, chartEnvoyYaml(true));
    return `wrote the chart's Envoy bootstraps to ${out} and ${traced}`;
  }
  if (command !== 'docs' && command !== 'envoy') throw new UsageError(`unknown command ${JSON.stringify(command)}: expected docs, envoy or chart`);

  const env = loadConfigOrExit(publicUrlsEnv.extend(tracingEnv.shape), 'render');
  const urls = publicUrls(env);
  if (command === 'docs') {
    const { values } = parseArgs({ args: rest, options: { out: { type: 'string' } }, strict: true, allowPositionals: false });
    const out = resolve(required(values.out, '--out', 'the directory to write the documents to'));
    // Loaded here only: the bootstrap needs none of the documents' code (docs/decisions.md §31).
    const { discoveryDocuments } = await import('./discovery.js');
    const names = await writeDocuments(urls, discoveryDocuments(urls), out);
    return `wrote ${names.size} documents for ${urls.siteUrl} to ${out}`;
  }

  const { values } = parseArgs({
    args: rest,
    options: {
      out: { type: 'string' },
      'docs-dir': { type: 'string' },
      edge: { type: 'string', multiple: true },
      auth: { type: 'string', multiple: true },
      'listen-address': { type: 'string' },
      'listen-port': { type: 'string' },
      'admin-address': { type: 'string' },
      'admin-port': { type: 'string' },
      'health-port': { type: 'string' },
      'quota-limit': { type: 'string' },
      'rate-limit-per-second': { type: 'string' },
      'rate-limit-burst': { type: 'string' },
      'trusted-hops': { type: 'string' },
    },
    strict: true,
    allowPositionals: false,
  });
  const out = resolve(required(values.out, '--out', 'the file to write the bootstrap to'));
  const docsDir = resolve(required(values['docs-dir'], '--docs-dir', 'where the documents are (written by `render.js docs --out DIR`)'));
  const healthPort = numberOf(port.min(1), values['health-port'], '--health-port', 9090);
  const bootstrap = envoyBootstrap({
    urls,
    docsDir,
    listen: { address: values['listen-address'] ?? '0.0.0.0', port: numberOf(port.min(1), values['listen-port'], '--listen-port', env.PORT) },
    admin: { address: values['admin-address'] ?? '127.0.0.1', port: numberOf(port.min(1), values['admin-port'], '--admin-port', 9901) },
    edge: endpoints(values.edge, healthPort, '--edge'),
    auth: endpoints(values.auth, healthPort, '--auth'),
    quotaLimit: numberOf(count, values['quota-limit'], '--quota-limit', ENVOY_DEFAULTS.quotaLimit),
    rateLimit: {
      perSecond: numberOf(count, values['rate-limit-per-second'], '--rate-limit-per-second', ENVOY_DEFAULTS.rateLimit.perSecond),
      burst: numberOf(count, values['rate-limit-burst'], '--rate-limit-burst', ENVOY_DEFAULTS.rateLimit.burst),
    },
    trustedProxyHops: numberOf(z.coerce.number().int().min(0).max(10), values['trusted-hops'], '--trusted-hops', 0),
    tracing: envoyTracing(env),
  });
  await writeText(out, envoyYaml(bootstrap, `Envoy bootstrap for ${urls.siteUrl}, rendered by gateway/dist/render.js from the route table.`));
  return `wrote an Envoy bootstrap for ${urls.siteUrl} to ${out} (documents in ${docsDir})`;
}

try {
  const said = await main(process.argv.slice(2));
  if (said !== '') process.stdout.write(`${said}\n`);
} catch (error) {
  // parseArgs says what is wrong with the flags (an unknown one, a missing value) with this code.
  const usage = error instanceof UsageError || (error instanceof TypeError && (error as NodeJS.ErrnoException).code?.startsWith('ERR_PARSE_ARGS') === true);
  if (!usage) throw error;
  process.stderr.write(`render: ${(error as Error).message}\n${USAGE}\n`);
  process.exit(2);
}
