#!/usr/bin/env node
// Part of the gateway's `npm run build`: copies the API reference renderer's standalone bundle
// (@scalar/api-reference, a build-time dependency) to dist/assets/scalar.js, which the gateway
// serves at /developers/assets/scalar.js, with its Brotli and gzip forms beside it (scalar.js.br,
// scalar.js.gz), compressed once here at the strongest settings: Brotli's best takes seconds on
// these 5 MB, too long for every start-up (docs/decisions.md §25). The running gateway reads these
// files, so the package and the ~200 MB of Vue, icon and AI-SDK packages it depends on stay out of
// the production install and the container image.
//
// Plain JavaScript on purpose: it runs as a build step, beside tsc.
import { copyFileSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import process from 'node:process';
import { URL } from 'node:url';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';

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
  process.stderr.write(
    `gateway build: ${source} is missing: @scalar/api-reference moved its standalone bundle; point gateway/scripts/vendor-assets.mjs at the new place\n`,
  );
  process.exit(1);
}
mkdirSync(new URL('.', target), { recursive: true });
const brotli = new URL(`${target.href}.br`);
const gzip = new URL(`${target.href}.gz`);
// The forms are made again only when the bundle changed (a new version of the package): a rebuild
// of the gateway alone costs no compression.
const fresh =
  [target, brotli, gzip].every((file) => existsSync(file)) &&
  readFileSync(target).equals(readFileSync(source)) &&
  statSync(brotli).mtimeMs >= statSync(target).mtimeMs;
if (!fresh) {
  copyFileSync(source, target);
  const body = readFileSync(target);
  writeFileSync(
    brotli,
    brotliCompressSync(body, {
      params: {
        [constants.BROTLI_PARAM_QUALITY]: constants.BROTLI_MAX_QUALITY,
        [constants.BROTLI_PARAM_LGWIN]: 24,
        [constants.BROTLI_PARAM_SIZE_HINT]: body.length,
      },
    }),
  );
  writeFileSync(gzip, gzipSync(body, { level: 9 }));
}
