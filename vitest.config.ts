import { defineConfig } from 'vitest/config';

export default defineConfig({
  // Workspace packages resolve to their TypeScript sources in tests (the "source" export condition).
  resolve: { conditions: ['source'] },
  ssr: { resolve: { conditions: ['source'], externalConditions: ['source'] } },
  test: {
    include: ['services/*/test/**/*.test.ts', 'gateway/test/**/*.test.ts', 'proto/test/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    reporters: ['default', './scripts/vitest-summary.ts'],
  },
});
