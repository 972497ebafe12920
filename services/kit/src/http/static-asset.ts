import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';

/**
 * Files served as they are (the gateway's documents, edge's room script): compressed once when
 * they are made, sent in the coding the client accepts, with a strong ETag per coding, 304 for a
 * copy the client already holds, and a Cache-Control of their own (docs/decisions.md §25).
 */

/** The codings a static asset may be sent in, most preferred first on a tie of q-values. */
export const CONTENT_CODINGS = ['br', 'gzip', 'identity'] as const;
export type ContentCoding = (typeof CONTENT_CODINGS)[number];

/** The compressed forms of an asset, made once. */
export interface Compressed {
  br: Buffer;
  gzip: Buffer;
}

/**
 * How caches may keep an asset: `revalidate` (the default) for what changes with a deploy, asked
 * again every time and answered 304 while unchanged; `immutable` for what is linked by the digest of
 * its content (`?v=<digest>`), kept a year without asking when the link's digest is this asset's
 * (an older replica asked under a newer link answers `revalidate`, so nothing stale is kept a year).
 */
export type CachePolicy = 'revalidate' | 'immutable';

export interface StaticAsset {
  /** The bytes as they are (the identity coding). */
  body: Buffer;
  /** A digest of `body`: every coding's ETag is made from it. */
  digest: string;
  /** Absent for a type compression does not shrink (images, fonts) and below MIN_COMPRESSED_BYTES. */
  compressed?: Compressed;
  cache: CachePolicy;
}

const COMPRESSIBLE = /^(text\/|application\/(json|javascript|xml|wasm|manifest\+json|[a-z0-9.+-]+\+(json|xml))|image\/svg\+xml)/i;

/** Whether a type gains from compression: text, JSON, JavaScript, XML and SVG. */
export function isCompressible(contentType: string): boolean {
  return COMPRESSIBLE.test(contentType.trim());
}

/**
 * The smallest asset sent compressed. Below it an answer is three packets at most, which arrive in
 * the first round trip (TCP's initial window is ten) whatever their coding: compressing saves
 * bytes but no time, and a document sent compressed is three representations for caches to keep
 * apart instead of one (docs/decisions.md §25).
 */
export const MIN_COMPRESSED_BYTES = 4096;

/**
 * Both compressed forms, at the strongest settings that stay quick at start-up: Brotli's quality
 * 11 up to 64 KiB, 9 above (quality 11 spends seconds on megabytes for a few per cent), gzip level 9.
 */
export function compress(body: Buffer): Compressed {
  const quality = body.length <= 64 * 1024 ? constants.BROTLI_MAX_QUALITY : 9;
  return {
    br: brotliCompressSync(body, { params: { [constants.BROTLI_PARAM_QUALITY]: quality, [constants.BROTLI_PARAM_SIZE_HINT]: body.length } }),
    gzip: gzipSync(body, { level: 9 }),
  };
}

/** The digest an asset's ETags are made from: 128 bits of SHA-256, base64url. */
export function digestOf(body: Buffer): string {
  return createHash('sha256').update(body).digest('base64url').slice(0, 22);
}

/**
 * An asset, compressed now when its type gains from it and it is large enough (or from forms made
 * earlier, at build time, for a bundle too large to compress at start-up).
 */
export function staticAsset(body: Buffer, contentType: string, options: { cache?: CachePolicy; compressed?: Compressed } = {}): StaticAsset {
  const compressed = options.compressed ?? (isCompressible(contentType) && body.length >= MIN_COMPRESSED_BYTES ? compress(body) : undefined);
  return { body, digest: digestOf(body), cache: options.cache ?? 'revalidate', ...(compressed === undefined ? {} : { compressed }) };
}

/** A strong ETag per coding: the representations differ, so their validators do too (RFC 9110 §8.8.3). */
export function etagOf(digest: string, coding: ContentCoding): string {
  return coding === 'identity' ? `"${digest}"` : `"${digest}-${coding}"`;
}

/** The Cache-Control of an answer: a year only for an immutable asset asked for under its own digest. */
export function cacheControlOf(policy: CachePolicy, versionAsked?: string, digest?: string): string {
  return policy === 'immutable' && versionAsked !== undefined && versionAsked === digest ? 'public, max-age=31536000, immutable' : 'public, no-cache';
}

type Negotiator = { encodings(available: readonly string[], options?: { preferred?: readonly string[] }): string[] };
const Negotiator = createRequire(import.meta.url)('negotiator') as new (request: { headers: Record<string, string | undefined> }) => Negotiator;

/**
 * The coding to send for an `Accept-Encoding` (RFC 9110 §12.5.3, with `negotiator`, as Express
 * reads it): the highest q-value among Brotli, gzip and identity, Brotli first on a tie; identity
 * when the header is absent, and when nothing acceptable is on offer.
 */
export function negotiateCoding(acceptEncoding: string | undefined): ContentCoding {
  if (acceptEncoding === undefined) return 'identity';
  try {
    const [best] = new Negotiator({ headers: { 'accept-encoding': acceptEncoding } }).encodings(CONTENT_CODINGS, { preferred: CONTENT_CODINGS });
    return (best as ContentCoding | undefined) ?? 'identity';
  } catch {
    // A header negotiator cannot parse asks for nothing we can read: the bytes as they are.
    return 'identity';
  }
}

/** An entity tag without its weak mark: If-None-Match compares weakly (RFC 9110 §13.1.2). */
function opaque(tag: string): string {
  return tag.trim().replace(/^W\//, '');
}

/** Whether `If-None-Match` names this ETag (or `*`): the client holds this representation already. */
export function holdsTag(ifNoneMatch: string | undefined, etag: string): boolean {
  if (ifNoneMatch === undefined) return false;
  if (ifNoneMatch.trim() === '*') return true;
  return ifNoneMatch.split(',').some((tag) => opaque(tag) === etag);
}

/** What to send for a request: the coding, its bytes and the headers that describe them. */
export interface Representation {
  coding: ContentCoding;
  body: Buffer;
  headers: Record<string, string>;
}

/** The representation of `asset` for these request headers, asked for under the version `versionAsked` (`?v=`). */
export function representationOf(asset: StaticAsset, acceptEncoding: string | undefined, versionAsked?: string): Representation {
  const coding = asset.compressed === undefined ? 'identity' : negotiateCoding(acceptEncoding);
  const body = coding === 'identity' || asset.compressed === undefined ? asset.body : asset.compressed[coding];
  return {
    coding,
    body,
    headers: {
      etag: etagOf(asset.digest, coding),
      'cache-control': cacheControlOf(asset.cache, versionAsked, asset.digest),
      // Only an asset sent in more than one coding varies by the request's Accept-Encoding.
      ...(asset.compressed === undefined ? {} : { vary: 'Accept-Encoding' }),
      ...(coding === 'identity' ? {} : { 'content-encoding': coding }),
    },
  };
}

/**
 * Answers GET or HEAD for an asset: 304 when the client holds this representation, else 200 with
 * its bytes (none for HEAD, whose headers are GET's). `always` go on both (a request id, CORS);
 * `content` describe the bytes (Content-Type, a page's CSP) and go on the 200 only, as a 304
 * carries only the validator and caching headers (RFC 9110 §15.4.5).
 */
export function sendStatic(
  req: IncomingMessage,
  res: ServerResponse,
  asset: StaticAsset,
  headers: { always: Record<string, string>; content: Record<string, string> },
): void {
  const accept = req.headers['accept-encoding'];
  const query = (req.url ?? '').indexOf('?');
  const version = query < 0 ? undefined : (new URLSearchParams((req.url ?? '').slice(query + 1)).get('v') ?? undefined);
  const chosen = representationOf(asset, Array.isArray(accept) ? accept.join(', ') : accept, version);
  if (holdsTag(req.headers['if-none-match'], chosen.headers.etag as string)) {
    const { 'content-encoding': _coding, ...validators } = chosen.headers;
    res.writeHead(304, { ...headers.always, ...validators });
    res.end();
    return;
  }
  res.writeHead(200, { ...headers.always, ...headers.content, ...chosen.headers, 'content-length': String(chosen.body.length) });
  res.end(req.method === 'HEAD' ? undefined : chosen.body);
}
