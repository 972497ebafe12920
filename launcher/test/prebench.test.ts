import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * `npm run bench`'s preparation (package.json's prebench) on a clone where `npm test` never ran:
 * before any row starts, it installs what the rows need, as `npm test` does; without the real
 * Envoy, the two rows behind it were left unmeasured.
 */
const root = fileURLToPath(new URL('../../', import.meta.url));
const folders: string[] = [];

describe("npm run bench's preparation", () => {
  afterAll(() => {
    for (const folder of folders) rmSync(folder, { recursive: true, force: true });
  });

  it('installs Envoy into the .venv/ the rows behind Envoy run it from, when it is missing, and nothing the second time', () => {
    const { scripts } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    const steps = (scripts.prebench ?? '').split('&&').map((step) => step.trim());
    // The build comes last; every step before it installs, and runs here in a folder with the
    // project's scripts and nothing installed, as a fresh clone has them.
    expect(steps.at(-1)).toBe("bash scripts/with-node.sh 'npm run build --silent'");
    const clone = mkdtempSync(join(tmpdir(), 'agentroom-prebench-'));
    folders.push(clone);
    cpSync(join(root, 'scripts'), join(clone, 'scripts'), { recursive: true });
    const envoy = join(clone, '.venv/bin/envoy');
    expect(existsSync(envoy)).toBe(false);
    const prepare = (): string =>
      steps
        .slice(0, -1)
        .map((step) => {
          const result = spawnSync('bash', ['-c', step], { cwd: clone, encoding: 'utf8', timeout: 280_000 });
          expect(result.status, `${step}: ${result.stderr}`).toBe(0);
          return result.stdout;
        })
        .join('');

    prepare();
    // The rows behind Envoy run the launcher's `npm run cluster -- --envoy`, which runs this one.
    const version = spawnSync(envoy, ['--version'], { encoding: 'utf8' });
    expect(version.stdout).toMatch(/version: [0-9a-f]{40}\/1\.\d+\.\d+\//);
    expect(prepare()).toContain('python tools present in .venv');
  }, 300_000);
});
