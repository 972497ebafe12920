import type { Server } from 'node:http';
import type { PublicUrls } from '@agentroom/kit/config';
import { MIN_COMPRESSED_BYTES, negotiateCoding } from '@agentroom/kit/http';
import { freePort } from '@agentroom/kit/local';
import { createLogger } from '@agentroom/kit/log';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectCompressedAsset, expectUncompressedAsset, NEGOTIATIONS, rawRequest } from '../../e2e/support/compression.js';
import { discoveryDocuments } from '../src/discovery.js';
import { startRouter, type Target } from '../src/router.js';
import { resolveRoutes } from '../src/routes.js';

describe('negotiating a coding', () => {
  it.each(NEGOTIATIONS)('Accept-Encoding %j gets %s', (accept, coding) => {
    expect(negotiateCoding(accept)).toBe(coding);
  });
});

describe('the documents, compressed once', () => {
  it("compresses every document of a text type from 4 KiB, links the reference bundle and the pages' shared files by their digests, and lets caches keep only those for long", () => {
    const documents = discoveryDocuments({ siteUrl: 'http://localhost:8080', apiUrl: 'http://localhost:8080/api', baseUrl: 'http://localhost:8080/api/v1' });
    for (const [path, document] of documents) {
      const text = /^(text\/|application\/json)/.test(document.contentType);
      expect(document.asset.compressed !== undefined, path).toBe(text && document.body.length >= MIN_COMPRESSED_BYTES);
      expect(document.asset.cache, path).toBe(
        ['/developers/assets/scalar.js', '/assets/site.css', '/assets/site.js', '/favicon.svg'].includes(path) ? 'immutable' : 'revalidate',
      );
    }
    const scalar = documents.get('/developers/assets/scalar.js')!;
    expect(documents.get('/developers/reference/interactive')!.body.toString('utf8')).toContain(`/developers/assets/scalar.js?v=${scalar.asset.digest}"`);
    // The build's forms, at Brotli's best: about a fifth of the bundle.
    expect(scalar.asset.compressed!.br.length).toBeLessThan(scalar.body.length / 4);
  });
});

describe('the router sends the documents compressed, cacheable and revalidated', () => {
  let server: Server;
  let urls: PublicUrls;
  let documents: ReturnType<typeof discoveryDocuments>;

  beforeAll(async () => {
    const port = await freePort();
    const origin = `http://127.0.0.1:${port}`;
    urls = { siteUrl: origin, apiUrl: `${origin}/api`, baseUrl: `${origin}/api/v1` };
    documents = discoveryDocuments(urls);
    const standIn: Target = {
      kind: 'local',
      handler: (_req, res) => {
        res.writeHead(404);
        res.end();
      },
    };
    ({ server } = await startRouter({
      routes: resolveRoutes(urls),
      targets: { edge: standIn, auth: standIn },
      documents,
      log: createLogger('test', 'silent'),
      port,
      host: '127.0.0.1',
    }));
  });

  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('openapi.json, llms.txt and the portal: Brotli or gzip by Accept-Encoding, ETag and 304, revalidated', async () => {
    for (const path of ['/openapi.json', '/llms.txt', '/developers', '/.well-known/ai-agent.json']) {
      await expectCompressedAsset(`${urls.siteUrl}${path}`, documents.get(path)!.body, 'public, no-cache');
    }
  });

  it('the reference bundle, under its versioned link: compressed at build time, kept a year', async () => {
    const scalar = documents.get('/developers/assets/scalar.js')!;
    await expectCompressedAsset(`${urls.siteUrl}/developers/assets/scalar.js?v=${scalar.asset.digest}`, scalar.body, 'public, max-age=31536000, immutable');
  });

  it('an immutable file asked for without its digest, or under another (an older copy behind a newer link, mid-deploy), is only revalidated', async () => {
    const scalar = documents.get('/developers/assets/scalar.js')!;
    await expectCompressedAsset(`${urls.siteUrl}/developers/assets/scalar.js`, scalar.body, 'public, no-cache');
    await expectCompressedAsset(`${urls.siteUrl}/developers/assets/scalar.js?v=another`, scalar.body, 'public, no-cache');
    const css = documents.get('/assets/site.css')!;
    await expectCompressedAsset(`${urls.siteUrl}/assets/site.css?v=${css.asset.digest}`, css.body, 'public, max-age=31536000, immutable');
    await expectCompressedAsset(`${urls.siteUrl}/assets/site.css?v=older`, css.body, 'public, no-cache');
  });

  it('a small problem page as it is, with its ETag', async () => {
    await expectUncompressedAsset(`${urls.siteUrl}/problems/not-found`, documents.get('/problems/not-found')!.body, 'public, no-cache');
  });

  it("a 304 keeps the router's own headers and CORS, and drops the page's content headers", async () => {
    const first = await rawRequest(`${urls.siteUrl}/developers`, { 'accept-encoding': 'br' });
    const again = await rawRequest(`${urls.siteUrl}/developers`, { 'accept-encoding': 'br', 'if-none-match': first.headers.etag ?? '' });
    expect(again.status).toBe(304);
    expect(again.headers).toMatchObject({ 'access-control-allow-origin': '*', 'ratelimit-limit': '5000', 'x-request-id': expect.any(String) });
    expect(again.headers['content-security-policy']).toBeUndefined();
    expect(again.headers['content-type']).toBeUndefined();
  });
});
