import { defineConfig } from 'vitest/config';

/**
 * One vitest project per workspace (`vitest run --project room`, or `npm test` inside a workspace),
 * for its unit and contract tests in `<workspace>/test/`; and `e2e`, the end-to-end tests of the
 * whole product, by feature in `e2e/<feature>/` (`vitest run --project e2e`, or `vitest run e2e/mcp`); and
 * `repo`, the checks of the repository as a whole in `test/` (its import rules).
 */
const WORKSPACES: Record<string, string> = {
  proto: 'proto',
  kit: 'services/kit',
  api: 'api',
  room: 'services/room',
  messaging: 'services/messaging',
  delivery: 'services/delivery',
  record: 'services/record',
  auth: 'services/auth',
  edge: 'services/edge',
  gateway: 'gateway',
  launcher: 'launcher',
};

export default defineConfig({
  // Workspace packages resolve to their TypeScript sources in tests, by an export condition of our
  // own: a plain "source" would also send dependencies that publish one (eventsource-parser) to their .ts.
  resolve: { conditions: ['@agentroom/source'] },
  ssr: { resolve: { conditions: ['@agentroom/source'], externalConditions: ['@agentroom/source'] } },
  test: {
    // Two files at a time: most of a file's time is spent waiting on the processes it starts (Redis,
    // services, a cluster, chromium, Envoy, helm), so two workers on two cores finish the suite in
    // about two thirds of the time one takes (measured: 4.1 min against 6.1); a third worker adds
    // little and starves the cluster tests' start-up.
    maxWorkers: 2,
    // A worker keeps the modules it loaded from one file to the next: most files import the whole
    // product (express, grpc-js, the MCP and A2A SDKs), and loading it again for each file cost
    // about a quarter of the suite's CPU time. Tests share no module state they depend on: each
    // starts its own product, and metrics are read as differences.
    isolate: false,
    testTimeout: 20_000,
    hookTimeout: 30_000,
    // scrypt at its production cost takes most of a second a password; tests need no strong hashes.
    env: { PASSWORD_HASH_COST: '1024' },
    // Every JSON answer of a running product is checked against its own /openapi.json.
    setupFiles: ['./e2e/support/openapi-check.ts'],
    reporters: ['default', './scripts/vitest-summary.ts'],
    projects: [
      ...Object.entries(WORKSPACES).map(([name, folder]) => ({
        extends: true as const,
        test: { name, include: [`${folder}/test/**/*.test.ts`] },
      })),
      { extends: true, test: { name: 'e2e', include: ['e2e/**/*.test.ts'] } },
      // Checks of the repository as a whole (its import rules, test/boundaries.test.ts).
      { extends: true, test: { name: 'repo', include: ['test/**/*.test.ts'] } },
    ],
  },
});
