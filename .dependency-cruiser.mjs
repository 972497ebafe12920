// Which folders and packages may import which: checked by dependency-cruiser in `npm run lint`
// (so on every `npm test`), and proved to fail when broken by test/boundaries.test.ts.
// docs/decisions.md §26 says why each rule is there; CONTRIBUTING.md says where things go.
//
import { readFileSync } from 'node:fs';
import { URL } from 'node:url';

// Paths are the files' own, relative to the repository root, after resolution: an import by
// package name (`@agentroom/room`, `@agentroom/kit/grpc`) is followed through its workspace link
// to the source file it names, so a rule catches it as it catches a relative import.
// The rules are patterns, not lists: a new service under services/ or a new adapter folder under
// services/edge/src/ is covered as soon as it exists.

/** Edge's folders that adapters stand on: the core (operations/) and its plumbing. Every other folder of services/edge/src/ is an adapter. */
const EDGE_SHARED = '(?:operations|gateways|http)';
const EDGE_ADAPTER = `^services/edge/src/(?!${EDGE_SHARED}/)[^/]+/`;
/** A service: every folder under services/ but kit (the library they share). */
const SERVICE = '^services/(?!kit/)[^/]+/';
/** What may use the dev-only package: tests, end-to-end tests, the bench, scripts, and itself. */
const DEV_ONLY = '(?:^|/)test/|^e2e/|^bench/|^scripts/|^testkit/';

/** kit's areas: the files its package.json exports (`@agentroom/kit/<area>`), the only ones imported from outside kit. */
const KIT_AREAS = Object.values(JSON.parse(readFileSync(new URL('services/kit/package.json', import.meta.url), 'utf8')).exports).map(
  (target) => `^services/kit/${target['@agentroom/source'].replace(/^\.\//, '').replaceAll('.', '\\.')}$`,
);

/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    {
      name: 'service-to-service',
      comment: 'Services meet over gRPC (proto/) and share services/kit only: none imports another (edge included), nor the launcher that starts them all.',
      severity: 'error',
      from: { path: '^services/(?!kit/)([^/]+)/' },
      to: { path: ['^services/', '^launcher/'], pathNot: '^services/($1|kit)/' },
    },
    {
      name: 'edge-adapter-to-adapter',
      comment:
        "Edge's adapters (rest, mcp, a2a, oauth, live, web, and any new folder) never import each other: what two need lives in operations/, gateways/ or http/.",
      severity: 'error',
      from: { path: `^services/edge/src/(?!${EDGE_SHARED}/)([^/]+)/` },
      to: { path: EDGE_ADAPTER, pathNot: '^services/edge/src/$1/' },
    },
    {
      name: 'edge-core-to-adapter',
      comment: "Edge's core (operations/) and what it stands on (gateways/, http/) import no adapter: an adapter renders the core, never the other way round.",
      severity: 'error',
      from: { path: `^services/edge/src/${EDGE_SHARED}/` },
      to: { path: EDGE_ADAPTER },
    },
    {
      name: 'not-to-bench',
      comment: 'Nothing imports bench/ but the bench itself: what tests and the bench share lives in testkit/.',
      severity: 'error',
      from: { pathNot: '^bench/' },
      to: { path: '^bench/' },
    },
    {
      name: 'kit-proto-to-product',
      comment: 'kit and proto are below everything: they import no service, api, gateway or launcher.',
      severity: 'error',
      from: { path: '^(?:services/kit|proto)/' },
      to: { path: [SERVICE, '^api/', '^gateway/', '^launcher/'] },
    },
    {
      name: 'api-to-service',
      comment: 'api/ is the public API as data: it imports kit and zod, no service, gateway or launcher.',
      severity: 'error',
      from: { path: '^api/' },
      to: { path: [SERVICE, '^gateway/', '^launcher/'] },
    },
    {
      name: 'gateway-to-service',
      comment: 'The gateway (routes, discovery documents, router, Envoy config) loads without any service: Envoy rendering and the Helm chart read it.',
      severity: 'error',
      from: { path: '^gateway/' },
      to: { path: [SERVICE, '^launcher/'] },
    },
    {
      name: 'testkit-outside-tests',
      comment: '@agentroom/testkit is dev-only: tests, e2e/, bench/ and scripts/ use it; no service, library, launcher or image code does.',
      severity: 'error',
      from: { pathNot: DEV_ONLY },
      to: { path: '^testkit/' },
    },
    {
      name: 'image-to-kit-local',
      comment:
        "kit's local area starts processes on this machine (free ports, a redis-server): the launcher, tests and the bench use it, what the image runs never does.",
      severity: 'error',
      from: { path: [`${SERVICE}src/`, '^gateway/src/', '^api/src/'] },
      to: { path: '^services/kit/src/local/' },
    },
    {
      name: 'kit-by-area',
      comment: 'Outside kit, kit is imported by area (@agentroom/kit/grpc, /http, /store...), never by a path into its files.',
      severity: 'error',
      from: { pathNot: '^services/kit/' },
      to: { path: '^services/kit/src/', pathNot: KIT_AREAS },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(?:^|/)(?:node_modules|dist|\\.tools|\\.venv|\\.turbo|coverage|test-results)/|^proto/src/gen/' },
    // Type-only imports couple code as much as any: they count.
    tsPreCompilationDeps: true,
    // Workspace packages resolve to their TypeScript sources, by the export condition the tests use.
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['@agentroom/source', 'import', 'types', 'default'],
      extensions: ['.ts', '.js', '.mjs', '.cjs', '.json', '.d.ts'],
    },
  },
};
