import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * scripts/install-node.sh, as .ci/run and a newcomer use it: `export PATH="$(bash
 * scripts/install-node.sh):$PATH"`. It prints the folder of a supported `node` alone on stdout.
 */
const root = fileURLToPath(new URL('../../', import.meta.url));
const folders: string[] = [];

/**
 * A folder whose `node` says it is `version` when asked, and is the Node.js running these tests for
 * anything else (npm, which the script runs, starts the `node` on PATH).
 */
function nodeThatSays(version: string): string {
  const folder = mkdtempSync(join(tmpdir(), 'agentroom-node-'));
  folders.push(folder);
  const script = `#!/bin/sh\nif [ "$1" = --version ]; then echo ${version}; exit 0; fi\nexec "${process.execPath}" "$@"\n`;
  writeFileSync(join(folder, 'node'), script);
  chmodSync(join(folder, 'node'), 0o755);
  return folder;
}

function installNode(pathFirst: string): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync('bash', [join(root, 'scripts/install-node.sh')], {
    cwd: root,
    env: { ...process.env, PATH: `${pathFirst}:${dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin` },
    encoding: 'utf8',
    timeout: 240_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('scripts/install-node.sh', () => {
  afterAll(() => {
    for (const folder of folders) rmSync(folder, { recursive: true, force: true });
  });

  it("keeps the machine's Node.js when it is 24.11 or newer", () => {
    const folder = nodeThatSays('v24.11.0');
    const result = installNode(folder);
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toBe(`${folder}\n`);
    expect(result.stderr).toContain(`Node.js v24.11.0 at ${folder}/node`);
  });

  it('on an older one, prints the folder of the pinned Node.js 24 in .tools/node24 (installed from the npm registry the first time)', () => {
    const result = installNode(nodeThatSays('v22.22.0'));
    expect(result.status, result.stderr).toBe(0);
    const bin = join(root, '.tools/node24/bin');
    expect(result.stdout).toBe(`${bin}\n`);
    expect(result.stderr).toContain("the machine's is v22.22.0");
    const version = spawnSync(join(bin, 'node'), ['--version'], { encoding: 'utf8' });
    expect(version.stdout.trim()).toMatch(/^v24\.\d+\.\d+$/);

    // A second run reuses it: the same folder, nothing installed.
    const again = installNode(nodeThatSays('v20.20.2'));
    expect(again.stdout).toBe(`${bin}\n`);
    expect(again.stderr).not.toContain('installing');
  }, 300_000);
});
