import { request } from 'node:http';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { expect } from 'vitest';

/** Accept-Encoding values and the coding each gets (RFC 9110 §12.5.3): the router's and Envoy's alike. */
export const NEGOTIATIONS: readonly [string | undefined, 'br' | 'gzip' | 'identity'][] = [
  [undefined, 'identity'],
  ['', 'identity'],
  ['identity', 'identity'],
  ['gzip', 'gzip'],
  ['br', 'br'],
  ['gzip, deflate, br, zstd', 'br'],
  ['deflate, gzip, br, zstd', 'br'],
  ['GZIP', 'gzip'],
  ['br;q=0.5, gzip', 'gzip'],
  ['gzip;q=0.8, br;q=0.9', 'br'],
  ['br;q=0.5, gzip;q=0.5', 'br'],
  ['br;q=0, gzip;q=0', 'identity'],
  ['br;q=0.2, identity;q=0.5', 'identity'],
  ['br;q=0.2', 'br'],
  ['*', 'br'],
  ['*;q=0.5, gzip;q=1', 'gzip'],
  ['*;q=0, identity', 'identity'],
  ['br;q=0, *', 'gzip'],
  ['deflate', 'identity'],
  ['gzip ; q=0.7 , br ; q=0.6', 'gzip'],
];

/** An answer as it came over the wire: fetch() would decompress it, and hide its Content-Encoding. */
export interface RawAnswer {
  status: number;
  headers: Record<string, string | undefined>;
  body: Buffer;
}

export function rawRequest(url: string, headers: Record<string, string> = {}, method = 'GET'): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const sent = request(url, { method, headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        const flat = Object.fromEntries(Object.entries(response.headers).map(([name, value]) => [name, Array.isArray(value) ? value.join(', ') : value]));
        resolve({ status: response.statusCode ?? 0, headers: flat, body: Buffer.concat(chunks) });
      });
      response.on('error', reject);
    });
    sent.on('error', reject);
    sent.end();
  });
}

/** The bytes an answer stands for, decoded by its Content-Encoding. */
export function decoded(answer: RawAnswer): Buffer {
  const coding = answer.headers['content-encoding'];
  if (coding === undefined) return answer.body;
  if (coding === 'br') return brotliDecompressSync(answer.body);
  if (coding === 'gzip') return gunzipSync(answer.body);
  throw new Error(`unexpected Content-Encoding ${coding}`);
}

/**
 * A static asset answered as docs/decisions.md §25 says, by whoever serves it: Brotli or gzip by
 * Accept-Encoding (q-values included), the bytes as they are without it, every form decoding to
 * exactly `identity`; `Vary: Accept-Encoding`; a strong ETag per coding, and 304 for a copy held;
 * HEAD with GET's headers; `cacheControl` on every answer.
 */
export async function expectCompressedAsset(url: string, identity: Buffer, cacheControl: string): Promise<void> {
  const codings = {
    br: 'br',
    gzip: 'gzip',
    'gzip, deflate, br, zstd': 'br',
    'br;q=0.5, gzip': 'gzip',
    'br;q=0, gzip;q=0': undefined,
    identity: undefined,
    '*': 'br',
  } as const;
  const etags = new Set<string>();
  for (const [accept, coding] of Object.entries(codings)) {
    const answer = await rawRequest(url, { 'accept-encoding': accept });
    expect(answer.status, `${url} with ${accept}`).toBe(200);
    expect(answer.headers['content-encoding'], `${url} with ${accept}`).toBe(coding);
    expect(decoded(answer).equals(identity), `${url} with ${accept} decodes to the bytes as they are`).toBe(true);
    if (coding !== undefined) expect(answer.body.length, `${url} in ${coding}`).toBeLessThan(identity.length / 2);
    expect(answer.headers.vary).toBe('Accept-Encoding');
    expect(answer.headers['cache-control']).toBe(cacheControl);
    expect(answer.headers['content-length']).toBe(String(answer.body.length));
    const etag = answer.headers.etag ?? '';
    expect(etag, 'a strong ETag').toMatch(/^"[^"]+"$/);
    etags.add(`${coding ?? 'identity'} ${etag}`);

    // The copy just received is answered 304, weakly compared, among other tags; another coding's tag is not.
    const again = await rawRequest(url, { 'accept-encoding': accept, 'if-none-match': `"other", W/${etag}` });
    expect(again.status, `${url} with ${accept} and its ETag`).toBe(304);
    expect(again.body.length).toBe(0);
    expect(again.headers).toMatchObject({ etag, vary: 'Accept-Encoding', 'cache-control': cacheControl });
    expect(again.headers['content-encoding']).toBeUndefined();

    const head = await rawRequest(url, { 'accept-encoding': accept }, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.body.length).toBe(0);
    for (const name of ['content-type', 'content-length', 'content-encoding', 'etag', 'vary', 'cache-control'])
      expect(head.headers[name], `HEAD ${url} ${name}`).toBe(answer.headers[name]);
  }
  // One ETag per coding, the same whatever asked for it.
  expect(new Set([...etags].map((entry) => entry.split(' ')[0])).size).toBe(3);
  expect(new Set([...etags].map((entry) => entry.split(' ')[1])).size).toBe(3);
  const gzipTag = [...etags].find((entry) => entry.startsWith('gzip '))?.split(' ')[1] ?? '';
  expect((await rawRequest(url, { 'accept-encoding': 'br', 'if-none-match': gzipTag })).status, "another coding's ETag").toBe(200);
  // Without Accept-Encoding: the bytes as they are.
  const plain = await rawRequest(url);
  expect(plain.headers['content-encoding']).toBeUndefined();
  expect(plain.body.equals(identity)).toBe(true);
}

/** A small asset, sent as it is whatever the client accepts, with no Vary, but its ETag and 304 all the same. */
export async function expectUncompressedAsset(url: string, identity: Buffer, cacheControl: string): Promise<void> {
  const answer = await rawRequest(url, { 'accept-encoding': 'br, gzip' });
  expect(answer.status).toBe(200);
  expect(answer.headers['content-encoding']).toBeUndefined();
  expect(answer.headers.vary).toBeUndefined();
  expect(answer.body.equals(identity)).toBe(true);
  expect(answer.headers['cache-control']).toBe(cacheControl);
  const etag = answer.headers.etag ?? '';
  expect(etag).toMatch(/^"[^"]+"$/);
  const again = await rawRequest(url, { 'accept-encoding': 'br, gzip', 'if-none-match': etag });
  expect(again.status).toBe(304);
  expect(again.headers.etag).toBe(etag);
}
