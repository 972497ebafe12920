import { readFileSync } from 'node:fs';
import { isOlderThan, MINIMUM_NODE } from '@agentroom/gateway/node-version';
import { describe, expect, it } from 'vitest';

const root = new URL('../../', import.meta.url);

describe('the Node.js the project runs on', () => {
  it("runs the tests on a Node.js package.json's engines allows, the one .nvmrc, .node-version and scripts/install-node.sh name", () => {
    expect(isOlderThan(process.versions.node, MINIMUM_NODE), `this is Node.js ${process.versions.node}`).toBe(false);
    const pinned = /^version=(\S+)$/m.exec(readFileSync(new URL('scripts/install-node.sh', root), 'utf8'))?.[1];
    expect(pinned).toMatch(/^24\.\d+\.\d+$/);
    expect(readFileSync(new URL('.nvmrc', root), 'utf8').trim()).toBe(pinned);
    expect(readFileSync(new URL('.node-version', root), 'utf8').trim()).toBe(pinned);
    expect(isOlderThan(pinned ?? '', MINIMUM_NODE)).toBe(false);
  });
});
