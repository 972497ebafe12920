#!/usr/bin/env node
// Part of the gateway's `npm run build`: copies the API reference renderer's standalone bundle
// (@scalar/api-reference, a build-time dependency) to dist/assets/scalar.js, which the gateway
// serves at /developers/assets/scalar.js. The running gateway reads that one file, so the
// package and the ~200 MB of Vue, icon and AI-SDK packages it depends on stay out of the
// production install and the container image.
//
// Plain JavaScript on purpose: it runs as a build step, beside tsc.
import { copyFileSync, existsSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import process from 'node:process';
import { URL } from 'node:url';

const require = createRequire(import.meta.url);
const target = new URL('../dist/assets/scalar.js', import.meta.url);
let source;
try {
  // The package's exports name no browser bundle: it sits in dist/browser/, beside the main entry
  // (dist/index.js). standalone.js is the one-file build (the .esm.js one loads chunks).
  source = join(dirname(require.resolve('@scalar/api-reference')), 'browser', 'standalone.js');
} catch {
  process.stderr.write('gateway build: @scalar/api-reference is not installed (it is a devDependency): run `npm ci` without --omit=dev\n');
  process.exit(1);
}
if (!existsSync(source)) {
  process.stderr.write(`gateway build: ${source} is missing: @scalar/api-reference moved its standalone bundle; point gateway/scripts/vendor-assets.mjs at the new place\n`);
  process.exit(1);
}
mkdirSync(new URL('.', target), { recursive: true });
copyFileSync(source, target);
