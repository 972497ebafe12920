// Imported first by every launcher (start, cluster, router), so that on a Node.js older than the
// one package.json's "engines" asks for, this is the one line printed, before anything can fail
// in a less readable way.

/** The oldest Node.js we run on: package.json's `"engines": { "node": ">=24.11" }`, the first 24 LTS (a test keeps them in step). */
export const MINIMUM_NODE = '24.11.0';

/** True when `version` (`20.18.1`, `v22.3.0`) is older than `minimum`. */
export function isOlderThan(version: string, minimum: string): boolean {
  const parts = (value: string): number[] =>
    value
      .replace(/^v/, '')
      .split('.')
      .map((part) => Number.parseInt(part, 10) || 0);
  const have = parts(version);
  const need = parts(minimum);
  for (let i = 0; i < need.length; i += 1) {
    const difference = (have[i] ?? 0) - (need[i] ?? 0);
    if (difference !== 0) return difference < 0;
  }
  return false;
}

if (isOlderThan(process.versions.node, MINIMUM_NODE)) {
  process.stderr.write(
    `Agent Room needs Node.js ${MINIMUM_NODE} or newer (package.json "engines"), and this is Node.js ${process.versions.node}: run it through npm (\`npm start\`, \`npm test\`, \`npm run cluster\`), which finds or installs Node.js 24 itself, or put Node.js 24 first on PATH with \`export PATH="$(bash scripts/install-node.sh):$PATH"\` (a project-local copy from the npm registry) or \`nvm install 24\`\n`,
  );
  process.exit(1);
}
