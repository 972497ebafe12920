// PGlite's data folder as its initdb leaves it, made once by the build and loaded by each start in
// memory instead of running initdb again (docs/decisions.md §39): about a second instead of three
// or four on two cores, and without initdb's own WASM instance, which doubled the start's peak RSS.
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';

/** Beside the built module (`dist/`); from the TypeScript sources (tests), none, so PGlite runs its initdb. */
const TEMPLATE = fileURLToPath(new URL('./pglite-template.tar.gz', import.meta.url));

/** The template the build made, or undefined when there is none (PGlite then runs initdb as before). */
export function pgliteTemplate(): Blob | undefined {
  try {
    return new Blob([readFileSync(TEMPLATE)]);
  } catch {
    return undefined;
  }
}

/** Makes the template: a fresh PGlite's data folder, as a gzipped tarball, written whole or not at all. */
export async function makePGliteTemplate(path = TEMPLATE): Promise<void> {
  const db = await PGlite.create();
  try {
    const dump = await db.dumpDataDir('gzip');
    writeFileSync(`${path}.partial`, new Uint8Array(await dump.arrayBuffer()));
    renameSync(`${path}.partial`, path);
  } finally {
    await db.close();
  }
}
