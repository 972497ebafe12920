import { defineConfig } from 'vitest/config';

export default defineConfig({
  // Workspace packages resolve to their TypeScript sources in tests, by an export condition of our
  // own: a plain "source" would also send dependencies that publish one (eventsource-parser) to their .ts.
  resolve: { conditions: ['@agentroom/source'] },
  ssr: { resolve: { conditions: ['@agentroom/source'], externalConditions: ['@agentroom/source'] } },
  test: {
    include: ['services/*/test/**/*.test.ts', 'gateway/test/**/*.test.ts', 'proto/test/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    // Every JSON answer of a running product is checked against its own /openapi.json.
    setupFiles: ['./gateway/test/support/openapi-check.ts'],
    reporters: ['default', './scripts/vitest-summary.ts'],
  },
});
