import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { PublicUrls } from '@agentroom/kit/config';
import { CONTENT_CODINGS, type ContentCoding, representationOf } from '@agentroom/kit/http';
import type { ServedDocument } from './discovery.js';

/**
 * The file a discovery document is written to, named after its path below the site's root
 * (`/.well-known/ai-agent.json` -> `well-known--ai-agent.json`, `/problems/not-found` ->
 * `problems--not-found`). A document at a host's root outside the site's path (RFC 8414 metadata
 * for a site with a path, RFC 9728 metadata of an API elsewhere) is named after its whole path,
 * marked `origin--`. The index (`DOCUMENT_INDEX`) says which file holds which path.
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

/**
 * The index of the documents, written beside them: what Envoy's Lua filter reads at start to serve
 * every document by its path, whatever documents there are (docs/decisions.md §31). No document's
 * file is named so: their names start with a letter or a digit.
 */
export const DOCUMENT_INDEX = '_index.lua';

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

/** A value written as Lua source: plain strings and tables, nothing else. */
export type LuaValue = string | { [key: string]: LuaValue };

/** A Lua string literal: bytes kept as they are, but for the quote, the backslash and control characters. */
function luaString(text: string): string {
  let escaped = '';
  for (const char of text) {
    const code = char.charCodeAt(0);
    escaped += char === '\\' || char === '"' ? `\\${char}` : code < 0x20 || code === 0x7f ? `\\${String(code).padStart(3, '0')}` : char;
  }
  return `"${escaped}"`;
}

/** A Lua literal of `value`, tables one entry a line. */
export function luaLiteral(value: LuaValue, indent = ''): string {
  if (typeof value === 'string') return luaString(value);
  const inner = `${indent}  `;
  const entries = Object.entries(value).map(([key, item]) => `${inner}[${luaString(key)}] = ${luaLiteral(item, inner)},`);
  return entries.length === 0 ? '{}' : `{\n${entries.join('\n')}\n${indent}}`;
}

/**
 * The index as Lua source (`return { [path] = … }`), made with kit's `representationOf`, as the
 * router's `sendStatic` answers: for each path, each coding it is sent in with its file and the
 * headers that describe it (ETag, Cache-Control, Vary, Content-Encoding), the Cache-Control under
 * its own version (`?v=<digest>`), and the content's headers (type, nosniff, a page's CSP).
 */
export function documentIndex(documents: ReadonlyMap<string, ServedDocument>, names: ReadonlyMap<string, string>): string {
  const index: Record<string, LuaValue> = {};
  for (const [path, document] of documents) {
    const { asset } = document;
    const name = names.get(path);
    if (name === undefined) throw new Error(`no file name for ${path}`);
    const codings: Record<string, LuaValue> = {};
    for (const coding of asset.compressed === undefined ? (['identity'] as const) : CONTENT_CODINGS) {
      const { headers } = representationOf(asset, coding);
      codings[coding] = { file: coding === 'identity' ? name : `${name}${CODING_SUFFIX[coding]}`, headers };
    }
    index[path] = {
      digest: asset.digest,
      versioned: representationOf(asset, 'identity', asset.digest).headers['cache-control'] as string,
      content: {
        'content-type': document.contentType,
        'x-content-type-options': 'nosniff',
        ...Object.fromEntries(Object.entries(document.headers ?? {}).map(([key, value]) => [key.toLowerCase(), value])),
      },
      codings,
    };
  }
  return `-- The gateway's documents, written by gateway/src/document-files.ts for Envoy's Lua filter.\nreturn ${luaLiteral(index)}\n`;
}

/**
 * Writes every document's bytes under `dir` (created if missing), its compressed forms beside it
 * when it is sent compressed, and the index that says how to serve each (`DOCUMENT_INDEX`).
 */
export async function writeDocuments(urls: PublicUrls, documents: ReadonlyMap<string, ServedDocument>, dir: string): Promise<Map<string, string>> {
  const names = documentFileNames(urls, documents.keys());
  await mkdir(dir, { recursive: true });
  await Promise.all(
    [...documents].flatMap(([path, document]) => {
      const name = join(dir, names.get(path) as string);
      const { compressed } = document.asset;
      return [
        writeFile(name, document.body),
        ...(compressed === undefined
          ? []
          : [writeFile(`${name}${CODING_SUFFIX.br}`, compressed.br), writeFile(`${name}${CODING_SUFFIX.gzip}`, compressed.gzip)]),
      ];
    }),
  );
  // Last: a directory with an index has every file the index names.
  await writeFile(join(dir, DOCUMENT_INDEX), documentIndex(documents, names));
  return names;
}
