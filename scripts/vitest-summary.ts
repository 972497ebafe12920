import type { Reporter, TestModule } from 'vitest/node';

/** How many of the slowest files the summary names: where to look first when the suite grows slower. */
const SLOWEST = 8;

/**
 * Ends the run with one plain line, `tests: N passed, N failed, N skipped`, that any CI can read (and
 * the files whose setup failed), after the slowest files of a run of more than one file.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    let brokenFiles = 0;
    for (const module of testModules) {
      // A file whose setup failed (a hook threw) has no failed test, but it did not pass.
      if (module.state() === 'failed' && ![...module.children.allTests()].some((test) => test.result().state === 'failed')) brokenFiles += 1;
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') passed += 1;
        else if (state === 'failed') failed += 1;
        else skipped += 1;
      }
    }
    if (testModules.length > SLOWEST) {
      const slowest = [...testModules]
        .map((module) => ({ file: module.relativeModuleId, ms: module.diagnostic().duration + module.diagnostic().collectDuration }))
        .sort((a, b) => b.ms - a.ms)
        .slice(0, SLOWEST);
      process.stdout.write(`\nslowest files:\n${slowest.map(({ file, ms }) => `  ${(ms / 1000).toFixed(1).padStart(6)} s  ${file}`).join('\n')}\n`);
    }
    const broken = brokenFiles === 0 ? '' : `; ${brokenFiles} test files failed outside their tests (a setup hook)`;
    process.stdout.write(`\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped${broken}\n`);
  }
}
