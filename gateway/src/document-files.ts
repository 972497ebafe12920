import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { PublicUrls } from '@agentroom/kit';
import type { Document } from './discovery.js';

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

/** Every document's file name, refusing two documents that would share one. */
export function documentFileNames(urls: PublicUrls, paths: Iterable<string>): Map<string, string> {
  const names = new Map<string, string>();
  const taken = new Map<string, string>();
  for (const path of paths) {
    const name = documentFileName(urls, path);
    const other = taken.get(name);
    if (other !== undefined) throw new Error(`documents ${other} and ${path} would both be written to ${name}`);
    taken.set(name, path);
    names.set(path, name);
  }
  return names;
}

/** Writes every document's bytes under `dir` (created if missing); answers path -> file name. */
export async function writeDocuments(urls: PublicUrls, documents: ReadonlyMap<string, Document>, dir: string): Promise<Map<string, string>> {
  const names = documentFileNames(urls, documents.keys());
  await mkdir(dir, { recursive: true });
  await Promise.all([...documents].map(([path, document]) => writeFile(join(dir, names.get(path) as string), document.body)));
  return names;
}
