import { describe, expect, it } from 'vitest';
import { discoveryDocuments } from '../src/discovery.js';

const urls = { siteUrl: 'https://room.example', apiUrl: 'https://room.example/api', baseUrl: 'https://room.example/api/v1' };

describe('the API reference as HTML', () => {
  const documents = discoveryDocuments(urls);
  const html = documents.get('/developers/reference')!.body.toString('utf8');
  const openapi = JSON.parse(documents.get('/openapi.json')!.body.toString('utf8')) as {
    paths: Record<string, Record<string, { operationId: string; summary: string }>>;
    webhooks: Record<string, unknown>;
    components: { schemas: Record<string, unknown> };
  };

  it('shows every operation of openapi.json, with its method, path and summary, linked from the contents', () => {
    const operations = Object.entries(openapi.paths).flatMap(([path, item]) =>
      Object.entries(item).map(([method, operation]) => ({ path, method, ...operation })),
    );
    expect(operations.length).toBeGreaterThan(20);
    for (const operation of operations) {
      expect(html, operation.operationId).toContain(`<section class="operation" id="op-${operation.operationId}">`);
      expect(html, operation.operationId).toContain(`href="#op-${operation.operationId}"`);
      expect(html, operation.operationId).toContain(`<code>${operation.method.toUpperCase()} https://room.example/api${operation.path}</code>`);
    }
    for (const event of Object.keys(openapi.webhooks)) expect(html, event).toContain(`event <code>${event}</code>`);
    for (const schema of Object.keys(openapi.components.schemas)) expect(html, schema).toContain(`id="schema-${schema}"`);
  });

  it('needs no script of its own (only the shared one every page has, for local times), and links to the interactive reference, whose bundle it does not load', () => {
    expect([...html.matchAll(/<script[^>]*src="([^"]+)"/g)].map((match) => new URL(match[1] ?? '').pathname)).toEqual(['/assets/site.js']);
    expect(html).not.toContain('scalar.js');
    expect(html).toContain('href="https://room.example/developers/reference/interactive"');
    expect(documents.get('/developers/reference')!.headers?.['content-security-policy']).toContain("script-src 'self'");
    expect(documents.get('/developers/reference/interactive')!.body.toString('utf8')).toContain('/developers/assets/scalar.js?v=');
  });

  it('keeps markup in descriptions as text', () => {
    // Descriptions carry `<agent id>`: escaped, not markup.
    expect(html).toContain('@&lt;agent id&gt;');
    expect(html).not.toContain('@<agent id>');
  });
});
