import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { PublicUrls } from '@agentroom/kit/config';
import { compress, type ContentCoding, isCompressible } from '@agentroom/kit/http';
import type { ServedDocument } from './discovery.js';

/**
 * The file a discovery document is written to, named after its path below the site's root
 * (`/.well-known/ai-agent.json` -> `well-known--ai-agent.json`, `/problems/not-found` ->
 * `problems--not-found`). Below the root, so that documents rendered for one deployment's addresses
 * and a bootstrap rendered for another layout still agree on the names. A document at a host's root
 * outside the site's path (RFC 8414 metadata for a site with a path, RFC 9728 metadata of an API
 * elsewhere) is named after its whole path, marked `origin--`. Both `render.js docs` and the Envoy
 * bootstrap name files with this, and nothing else.
 */
export function documentFileName(urls: PublicUrls, path: string): string {
  const root = new URL(urls.siteUrl).pathname.replace(/\/$/, '');
  if (!path.startsWith('/')) throw new Error(`document path ${path} does not start with /`);
  const below = path.startsWith(`${root}/`);
  const flat = (rest: string): string => rest.replace(/^\.+/, '').replaceAll('/', '--');
  const name = below ? flat(path.slice(root.length + 1)) : `origin--${flat(path.slice(1))}`;
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(name)) throw new Error(`document path ${path} makes no safe file name (${JSON.stringify(name)})`);
  return name;
}

/** The suffix of a coding's file beside the document's own (`openapi.json.br`, `openapi.json.gz`). */
export const CODING_SUFFIX: Record<Exclude<ContentCoding, 'identity'>, string> = { br: '.br', gzip: '.gz' };

/** Every document's file name, refusing two documents that would share one (their compressed forms' included). */
export function documentFileNames(urls: PublicUrls, paths: Iterable<string>): Map<string, string> {
  const names = new Map<string, string>();
  const taken = new Map<string, string>();
  for (const path of paths) {
    const name = documentFileName(urls, path);
    for (const file of [name, ...Object.values(CODING_SUFFIX).map((suffix) => `${name}${suffix}`)]) {
      const other = taken.get(file);
      if (other !== undefined) throw new Error(`documents ${other} and ${path} would both be written to ${file}`);
      taken.set(file, path);
    }
    names.set(path, name);
  }
  return names;
}

/**
 * Writes every document's bytes under `dir` (created if missing), and beside them the compressed
 * forms of every document of a type that gains from it, whatever its size: a bootstrap rendered for
 * other addresses (the chart's) may send a document compressed that is smaller here.
 */
export async function writeDocuments(urls: PublicUrls, documents: ReadonlyMap<string, ServedDocument>, dir: string): Promise<Map<string, string>> {
  const names = documentFileNames(urls, documents.keys());
  await mkdir(dir, { recursive: true });
  await Promise.all(
    [...documents].flatMap(([path, document]) => {
      const name = join(dir, names.get(path) as string);
      const compressed = document.asset.compressed ?? (isCompressible(document.contentType) ? compress(document.body) : undefined);
      return [writeFile(name, document.body), ...(compressed === undefined ? [] : [writeFile(`${name}${CODING_SUFFIX.br}`, compressed.br), writeFile(`${name}${CODING_SUFFIX.gzip}`, compressed.gzip)])];
    }),
  );
  return names;
}
