/**
 * The flags every service process of the product runs with, wherever it starts: the image's
 * entrypoint (Dockerfile), `npm run cluster`'s children, the tests' and the bench's (e2e/deploy/
 * image.test.ts holds the Dockerfile and package.json to these lists).
 * - `--enable-source-maps`: stack traces name the TypeScript lines.
 * - `--max-semi-space-size`: Node 24's V8 lets the young generation grow to 128 MiB under load
 *   (Node 20's stopped at 32 MiB), and reads the bound only at start (the command line or
 *   NODE_OPTIONS, not `v8.setFlagsFromString`). 32 MiB for a service: an edge holding 10,000 event
 *   streams stays at 363 MiB (406 MiB without a bound), and the cluster's first page costs no more
 *   CPU than without one (16 MiB cost it about a fifth more, in scavenges). docs/decisions.md §19.
 */
export const NODE_FLAGS: readonly string[] = ['--enable-source-maps', '--max-semi-space-size=32'];

/**
 * `npm start`'s flags (package.json): the embedded default keeps every service's data in one
 * process, whose memory per stored post the bench holds to 2 KiB, so its young generation is kept
 * at Node 20's 16 MiB semi-space (449 MiB after 200,000 posts without a bound, 376 with it).
 */
export const EMBEDDED_NODE_FLAGS: readonly string[] = ['--enable-source-maps', '--max-semi-space-size=16'];
