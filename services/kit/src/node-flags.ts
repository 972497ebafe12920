/**
 * The flags every Node process of the product runs with, wherever it starts: `npm start`
 * (package.json), the image's entrypoint (Dockerfile), `npm run cluster`'s children, the bench's
 * and the tests' (e2e/deploy/image.test.ts and launcher's tests hold those two files to this list).
 * - `--enable-source-maps`: stack traces name the TypeScript lines.
 * - `--max-semi-space-size=16`: Node 24's V8 lets the young generation grow to 128 MiB under load
 *   (Node 20's stopped at 32 MiB), which put the embedded default at 449 MiB after 200,000 posts
 *   instead of 376, and an edge holding 10,000 event streams at 429 MiB instead of 340. V8 reads it
 *   only at start (the command line or NODE_OPTIONS), not from `v8.setFlagsFromString`
 *   (docs/decisions.md §19).
 */
export const NODE_FLAGS: readonly string[] = ['--enable-source-maps', '--max-semi-space-size=16'];
