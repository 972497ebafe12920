/**
 * Every JSON answer a test receives from a running product is checked against that product's own
 * `/openapi.json`: a documented operation must declare the status it answered with, and the body
 * must match the declared schema. Installed for every test file (vitest `setupFiles`), so the HTTP
 * tests hold the reference to the server's real answers without asking for it.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { afterEach } from 'vitest';

// ajv-formats is CommonJS: its default export arrives wrapped under ESM.
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule) as unknown as (ajv: Ajv2020) => void;

interface OpenApiDocument {
  servers: { url: string }[];
  paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, unknown> }> }>>;
}

interface Checker {
  apiUrl: URL;
  document: OpenApiDocument;
  ajv: Ajv2020;
  compiled: Map<string, ValidateFunction>;
}

const originalFetch = globalThis.fetch.bind(globalThis);
const checkers = new Map<string, Promise<Checker | undefined>>();
/** Mismatches seen: a test that received one fails after it, with every mismatch listed. */
const mismatches: string[] = [];
/** How many answers were checked against a documented operation: the self-test of this file reads it. */
export const checked = { count: 0 };

async function checkerFor(origin: string): Promise<Checker | undefined> {
  let checker = checkers.get(origin);
  if (!checker) {
    checker = (async () => {
      try {
        const response = await originalFetch(`${origin}/openapi.json`);
        if (!response.ok || !response.headers.get('content-type')?.startsWith('application/json')) return undefined;
        const document = (await response.json()) as OpenApiDocument;
        if (!document.servers?.[0]) return undefined;
        const ajv = new Ajv2020({ strict: false, allErrors: true });
        addFormats(ajv);
        ajv.addSchema(document as object, 'openapi');
        return { apiUrl: new URL(document.servers[0].url), document, ajv, compiled: new Map() };
      } catch {
        // Not one of ours (a service's own HTTP port, an upstream that is down): nothing to check against.
        return undefined;
      }
    })();
    checkers.set(origin, checker);
  }
  return checker;
}

/** The documented path template that `pathname` matches, below the API's server URL. */
function templateOf(checker: Checker, pathname: string): string | undefined {
  const prefix = checker.apiUrl.pathname.replace(/\/$/, '');
  if (!pathname.startsWith(`${prefix}/`)) return undefined;
  const below = pathname.slice(prefix.length);
  return Object.keys(checker.document.paths).find((template) => new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`).test(below));
}

function pointer(...segments: string[]): string {
  return segments.map((s) => s.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');
}

async function check(method: string, response: Response): Promise<void> {
  if (!response.url) return;
  const url = new URL(response.url);
  const contentType = response.headers.get('content-type') ?? '';
  if (!/^application\/(problem\+)?json/.test(contentType)) return;
  const checker = await checkerFor(url.origin);
  if (!checker || url.origin !== checker.apiUrl.origin) return;
  const template = templateOf(checker, url.pathname);
  const operation = template === undefined ? undefined : checker.document.paths[template]?.[method.toLowerCase()];
  if (!operation || template === undefined) return;
  checked.count += 1;
  const status = String(response.status);
  const declared = operation.responses[status] ?? operation.responses.default;
  const where = `${method} ${url.pathname} → ${status}`;
  if (!declared) {
    mismatches.push(`${where}: the status is not in /openapi.json (declared: ${Object.keys(operation.responses).join(', ')})`);
    return;
  }
  const mediaType = contentType.split(';')[0]?.trim() ?? '';
  if (!declared.content?.[mediaType]) {
    mismatches.push(`${where}: ${mediaType} is not a declared content type (declared: ${Object.keys(declared.content ?? {}).join(', ') || 'none'})`);
    return;
  }
  const ref = `openapi#/${pointer('paths', template, method.toLowerCase(), 'responses', operation.responses[status] ? status : 'default', 'content', mediaType, 'schema')}`;
  let validate = checker.compiled.get(ref);
  if (!validate) {
    validate = checker.ajv.compile({ $ref: ref });
    checker.compiled.set(ref, validate);
  }
  const body: unknown = await response.clone().json();
  if (!validate(body)) mismatches.push(`${where}: the body does not match the schema: ${checker.ajv.errorsText(validate.errors)}`);
}

globalThis.fetch = async (input, init) => {
  const response = await originalFetch(input, init);
  await check(init?.method ?? (input instanceof Request ? input.method : 'GET'), response);
  return response;
};

afterEach(() => {
  if (mismatches.length === 0) return;
  const found = mismatches.splice(0);
  throw new Error(`Answers that /openapi.json does not describe:\n- ${found.join('\n- ')}`);
});
