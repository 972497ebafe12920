import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cruise, type IConfiguration, type ICruiseResult } from 'dependency-cruiser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const repo = fileURLToPath(new URL('../', import.meta.url));
const CONFIG = join(repo, '.dependency-cruiser.mjs');

/** The rules `npm run lint` checks, as its config file states them. */
async function loadConfig(): Promise<IConfiguration> {
  return ((await import(/* @vite-ignore */ CONFIG)) as { default: IConfiguration }).default;
}

/** Each broken rule as `rule: from -> to`, cruising `paths` under `baseDir` with the lint's own rules and options. */
async function violations(baseDir: string, paths: string[]): Promise<string[]> {
  const config = await loadConfig();
  const { enhancedResolveOptions, ...options } = config.options ?? {};
  const result = await cruise(paths, { ...options, baseDir, validate: true, ruleSet: { forbidden: config.forbidden ?? [] } }, enhancedResolveOptions ?? {});
  const output = result.output as ICruiseResult;
  return output.summary.violations.map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`).sort();
}

/**
 * A small tree shaped like the repository, where each file breaks one rule (or keeps it), so each
 * rule is seen to fail: by a relative path and by a package name through its workspace link, for
 * folders that exist today and for ones the next issues may add (services/search, edge's feeds/).
 */
const FIXTURE: Record<string, string> = {
  'services/room/package.json': JSON.stringify({ name: '@agentroom/room', type: 'module', exports: { '.': { '@agentroom/source': './src/index.ts' } } }),
  'services/room/src/index.ts': 'export const room = 1;\n',
  'services/auth/src/by-path.ts': "import { room } from '../../room/src/index.js';\nexport const a = room;\n",
  'services/auth/src/by-name.ts': "import { room } from '@agentroom/room';\nexport const b = room;\n",
  'services/auth/src/kit-area.ts': "import { g } from '../../kit/src/grpc/index.js';\nexport const c = g;\n",
  'services/auth/src/kit-file.ts': "import { client } from '../../kit/src/grpc/client.js';\nexport const d = client;\n",
  'services/search/src/new-service.ts': "import { server } from '../../edge/src/server.js';\nexport const e = server;\n",
  'services/delivery/src/index.ts': 'export const delivery = 1;\n',
  'services/messaging/src/uses-testkit.ts': "import { tk } from '../../../testkit/src/index.js';\nexport const f = tk;\n",
  'services/messaging/src/uses-local.ts': "import { port } from '../../kit/src/local/index.js';\nexport const g = port;\n",
  'services/messaging/test/uses-testkit.test.ts':
    "import { tk } from '../../../testkit/src/index.js';\nimport { port } from '../../kit/src/local/index.js';\nexport const h = [tk, port];\n",
  'services/edge/src/server.ts':
    "import { routes } from './rest/routes.js';\nimport { tools } from './mcp/tools.js';\nexport const server = [routes, tools];\n",
  'services/edge/src/rest/routes.ts':
    "import { tools } from '../mcp/tools.js';\nimport { core } from '../operations/core.js';\nimport { answers } from '../http/answers.js';\nexport const routes = [tools, core, answers];\n",
  'services/edge/src/mcp/tools.ts': "import { core } from '../operations/core.js';\nexport const tools = core;\n",
  'services/edge/src/feeds/new-adapter.ts': "import { routes } from '../rest/routes.js';\nexport const feeds = routes;\n",
  'services/edge/src/operations/core.ts':
    "import type { Page } from '../live/first-page.js';\nimport { upstream } from '../gateways/room.gateway.js';\nexport const core: Page | number = upstream;\n",
  'services/edge/src/gateways/room.gateway.ts': 'export const upstream = 1;\n',
  'services/edge/src/http/answers.ts': 'export const answers = 1;\n',
  'services/edge/src/live/first-page.ts': 'export interface Page { n: number }\n',
  'services/kit/src/grpc/index.ts': "export { client as g } from './client.js';\n",
  'services/kit/src/grpc/client.ts': 'export const client = 1;\n',
  'services/kit/src/local/index.ts': 'export const port = 1;\n',
  'services/kit/src/to-service.ts': "import { delivery } from '../../delivery/src/index.js';\nexport const i = delivery;\n",
  'proto/src/to-api.ts': "import { api } from '../../api/src/index.js';\nexport const j = api;\n",
  'api/src/index.ts': "import { a } from '../../services/auth/src/by-path.js';\nexport const api = a;\n",
  'gateway/src/index.ts': "import { delivery } from '../../services/delivery/src/index.js';\nexport const gateway = delivery;\n",
  'launcher/src/index.ts':
    "import { port } from '../../services/kit/src/local/index.js';\nimport { delivery } from '../../services/delivery/src/index.js';\nexport const launcher = [port, delivery];\n",
  'bench/src/faults.ts': 'export const faults = 1;\n',
  'bench/src/run.ts': "import { faults } from './faults.js';\nimport { tk } from '../../testkit/src/index.js';\nexport const run = [faults, tk];\n",
  'e2e/cluster/chaos.test.ts':
    "import { faults } from '../../bench/src/faults.js';\nimport { tk } from '../../testkit/src/index.js';\nexport const k = [faults, tk];\n",
  'testkit/src/index.ts': "import { port } from '../../services/kit/src/local/index.js';\nexport const tk = port;\n",
  'scripts/tool.ts': "import { tk } from '../testkit/src/index.js';\nexport const l = tk;\n",
};

describe('the import rules (.dependency-cruiser.mjs, checked by npm run lint)', () => {
  let fixture: string;

  beforeAll(() => {
    fixture = mkdtempSync(join(tmpdir(), 'agentroom-boundaries-'));
    for (const [path, text] of Object.entries(FIXTURE)) {
      mkdirSync(dirname(join(fixture, path)), { recursive: true });
      writeFileSync(join(fixture, path), text);
    }
    // The workspace link npm makes, so an import by package name resolves as it does in the repository.
    mkdirSync(join(fixture, 'node_modules/@agentroom'), { recursive: true });
    symlinkSync(join(fixture, 'services/room'), join(fixture, 'node_modules/@agentroom/room'), 'dir');
  });

  afterAll(() => rmSync(fixture, { recursive: true, force: true }));

  it('reports every broken rule, by path or by package name, in folders that exist and in new ones', async () => {
    expect(await violations(fixture, ['services', 'api', 'gateway', 'launcher', 'bench', 'e2e', 'proto', 'testkit', 'scripts'])).toEqual(
      [
        'api-to-service: api/src/index.ts -> services/auth/src/by-path.ts',
        'edge-adapter-to-adapter: services/edge/src/feeds/new-adapter.ts -> services/edge/src/rest/routes.ts',
        'edge-adapter-to-adapter: services/edge/src/rest/routes.ts -> services/edge/src/mcp/tools.ts',
        'edge-core-to-adapter: services/edge/src/operations/core.ts -> services/edge/src/live/first-page.ts',
        'gateway-to-service: gateway/src/index.ts -> services/delivery/src/index.ts',
        'image-to-kit-local: services/messaging/src/uses-local.ts -> services/kit/src/local/index.ts',
        'kit-by-area: services/auth/src/kit-file.ts -> services/kit/src/grpc/client.ts',
        'kit-proto-to-product: proto/src/to-api.ts -> api/src/index.ts',
        'kit-proto-to-product: services/kit/src/to-service.ts -> services/delivery/src/index.ts',
        'not-to-bench: e2e/cluster/chaos.test.ts -> bench/src/faults.ts',
        'service-to-service: services/auth/src/by-name.ts -> services/room/src/index.ts',
        'service-to-service: services/auth/src/by-path.ts -> services/room/src/index.ts',
        'service-to-service: services/search/src/new-service.ts -> services/edge/src/server.ts',
        'testkit-outside-tests: services/messaging/src/uses-testkit.ts -> testkit/src/index.ts',
      ].sort(),
    );
  });

  it('holds for the repository as it is', async () => {
    expect(await violations(repo, ['.'])).toEqual([]);
  }, 120_000);
});

describe('what the packages declare', () => {
  const manifests = [
    'package.json',
    ...(JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { workspaces: string[] }).workspaces.map((folder) => `${folder}/package.json`),
  ];

  it('the dev-only package is a devDependency wherever it is declared, never a dependency', () => {
    const declaring = manifests.filter((path) => {
      const manifest = JSON.parse(readFileSync(join(repo, path), 'utf8')) as Record<string, Record<string, string> | undefined>;
      return ['dependencies', 'peerDependencies', 'optionalDependencies'].some((field) => manifest[field]?.['@agentroom/testkit'] !== undefined);
    });
    expect(manifests.length).toBeGreaterThan(10);
    expect(declaring).toEqual([]);
  });

  it('the dev-only package is not in the image: the Dockerfile copies nothing of it', () => {
    const dockerfile = readFileSync(join(repo, 'Dockerfile'), 'utf8');
    expect(dockerfile.split('\n').filter((line) => /^COPY\b/.test(line) && line.includes('testkit'))).toEqual([]);
  });

  it('kit, proto, api and the gateway declare no service, and no service depends on another', () => {
    const services = readdirSync(join(repo, 'services'), { withFileTypes: true })
      .filter((entry) => entry.isDirectory() && entry.name !== 'kit')
      .map((entry) => entry.name);
    expect(services).toEqual(expect.arrayContaining(['auth', 'delivery', 'edge', 'messaging', 'room']));
    // A service's devDependencies may name another service: its tests start that one's built main.js as a process (over gRPC), so it must be built first.
    const declared = (folder: string, fields: readonly ('dependencies' | 'devDependencies')[]): string[] => {
      const manifest = JSON.parse(readFileSync(join(repo, folder, 'package.json'), 'utf8')) as Record<string, Record<string, string> | undefined>;
      return fields.flatMap((field) => Object.keys(manifest[field] ?? {}));
    };
    const checked = [
      ...['services/kit', 'proto', 'api', 'gateway'].map((folder) => ({ folder, fields: ['dependencies', 'devDependencies'] as const })),
      ...services.map((name) => ({ folder: `services/${name}`, fields: ['dependencies'] as const })),
    ];
    const offenders = checked.flatMap(({ folder, fields }) =>
      declared(folder, fields)
        .filter(
          (name) =>
            [...services.map((service) => `@agentroom/${service}`), '@agentroom/launcher'].includes(name) && name !== `@agentroom/${folder.split('/')[1]}`,
        )
        .map((name) => `${folder} declares ${name}`),
    );
    expect(offenders).toEqual([]);
  });
});
