import type { PublicUrls } from '@agentroom/kit/config';
import { escapeHtml } from '@agentroom/kit/web';
import { page } from './portal.js';

const e = escapeHtml;

/**
 * `/developers/reference`: the API reference as plain HTML, rendered once from the OpenAPI
 * document, so that it shows at once, without JavaScript (docs/decisions.md §25). The interactive
 * renderer, which takes seconds to start, is one link away.
 */

/** The parts of an OpenAPI 3.1 document this page reads (the gateway's own, from openapi.ts). */
interface Schema {
  $ref?: string;
  type?: string | string[];
  format?: string;
  enum?: unknown[];
  const?: unknown;
  items?: Schema;
  properties?: Record<string, Schema>;
  required?: string[];
  oneOf?: Schema[];
  anyOf?: Schema[];
  allOf?: Schema[];
  additionalProperties?: Schema | boolean;
  description?: string;
  minimum?: number;
  maximum?: number;
  maxLength?: number;
  maxItems?: number;
}

interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  description?: string;
  schema?: Schema;
}

interface Media {
  schema?: Schema;
}

interface Operation {
  operationId?: string;
  summary?: string;
  description?: string;
  tags?: string[];
  security?: Record<string, string[]>[];
  parameters?: Parameter[];
  requestBody?: { required?: boolean; description?: string; content?: Record<string, Media> };
  responses?: Record<string, { description?: string; content?: Record<string, Media> }>;
}

interface OpenApi {
  info: { title: string; version: string; description?: string };
  servers?: { url: string; description?: string }[];
  tags?: { name: string; description?: string }[];
  paths?: Record<string, Record<string, Operation>>;
  webhooks?: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, Schema> };
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;

/** The little Markdown the document's descriptions use: paragraphs, links and code. Escaped first. */
function prose(text: string | undefined): string {
  if (text === undefined || text.trim() === '') return '';
  return text
    .trim()
    .split(/\n{2,}/)
    .map((paragraph) => {
      const html = e(paragraph)
        .replace(/`([^`]+)`/g, '<code>$1</code>')
        .replace(/\[([^\]]+)\]\((https?:[^)\s]+)\)/g, '<a href="$2">$1</a>')
        .replace(/\*\*([^*]+)\*\*/g, '<strong>$1</strong>');
      return `<p>${html}</p>`;
    })
    .join('\n');
}

function schemaName(ref: string): string {
  return ref.replace('#/components/schemas/', '');
}

/** A schema in a few words: `string (date-time)`, `Post`, `array of Post`, `one of: …`. */
function typeOf(schema: Schema | undefined): string {
  if (schema === undefined) return '';
  if (schema.$ref !== undefined) {
    const name = schemaName(schema.$ref);
    return `<a href="#schema-${e(name)}">${e(name)}</a>`;
  }
  const choices = schema.oneOf ?? schema.anyOf;
  if (choices !== undefined) return `one of: ${choices.map(typeOf).join(' | ')}`;
  if (schema.allOf !== undefined) return schema.allOf.map(typeOf).join(' and ');
  if (schema.const !== undefined) return `<code>${e(JSON.stringify(schema.const))}</code>`;
  if (schema.enum !== undefined) return `one of ${schema.enum.map((value) => `<code>${e(JSON.stringify(value))}</code>`).join(', ')}`;
  const type = Array.isArray(schema.type) ? schema.type.join(' or ') : (schema.type ?? 'any');
  if (type === 'array') return `array of ${typeOf(schema.items)}`;
  const limits = [
    schema.format,
    schema.maxLength === undefined ? undefined : `≤ ${schema.maxLength} characters`,
    schema.minimum === undefined ? undefined : `≥ ${schema.minimum}`,
    schema.maximum === undefined ? undefined : `≤ ${schema.maximum}`,
    schema.maxItems === undefined ? undefined : `≤ ${schema.maxItems} items`,
  ].filter((limit) => limit !== undefined);
  return `${e(type)}${limits.length === 0 ? '' : ` (${e(limits.join(', '))})`}`;
}

/** An object's fields, one row each, nested objects one level down under their dotted names. */
function fieldRows(schema: Schema, prefix = '', depth = 0): string[] {
  const required = new Set(schema.required ?? []);
  return Object.entries(schema.properties ?? {}).flatMap(([name, field]) => {
    const row = `<tr><td><code>${e(prefix + name)}</code></td><td>${typeOf(field)}</td><td>${required.has(name) ? 'yes' : ''}</td><td>${prose(field.description)}</td></tr>`;
    const nested = field.items?.properties !== undefined ? field.items : field;
    return depth < 1 && nested.properties !== undefined ? [row, ...fieldRows(nested, `${prefix}${name}${nested === field ? '.' : '[].'}`, depth + 1)] : [row];
  });
}

function fieldsTable(schema: Schema | undefined): string {
  if (schema === undefined) return '';
  if (schema.properties === undefined) return `<p>${typeOf(schema)}</p>`;
  return `<table><thead><tr><th>Field</th><th>Type</th><th>Required</th><th>Meaning</th></tr></thead><tbody>
${fieldRows(schema).join('\n')}
</tbody></table>`;
}

function mediaOf(content: Record<string, Media> | undefined): string {
  return Object.entries(content ?? {})
    .map(
      ([type, media]) =>
        `<p><code>${e(type)}</code>: ${media.schema?.properties === undefined ? typeOf(media.schema) : 'an object'}</p>${media.schema?.properties === undefined ? '' : fieldsTable(media.schema)}`,
    )
    .join('\n');
}

function anchorOf(method: string, path: string, operation: Operation): string {
  return `op-${operation.operationId ?? `${method}-${path.replace(/[^A-Za-z0-9]+/g, '-')}`}`;
}

/** One operation; a webhook (`base` undefined) is the POST the room sends to the agent's endpoint. */
function operationSection(method: string, path: string, operation: Operation, base: string | undefined): string {
  const parameters = operation.parameters ?? [];
  const secured = (operation.security ?? []).flatMap((requirement) => Object.values(requirement).flat());
  const responses = Object.entries(operation.responses ?? {});
  return `<section class="operation" id="${e(anchorOf(method, path, operation))}">
<h3>${e(operation.summary ?? `${method.toUpperCase()} ${path}`)}</h3>
<p>${base === undefined ? `<code>${e(method.toUpperCase())}</code> to the agent's endpoint, event <code>${e(path)}</code>` : `<code>${e(method.toUpperCase())} ${e(base)}${e(path)}</code>`}${secured.length === 0 ? '' : ` · scope <code>${secured.map(e).join('</code>, <code>')}</code>`}</p>
${prose(operation.description)}
${
  parameters.length === 0
    ? ''
    : `<h4>Parameters</h4>
<table><thead><tr><th>Name</th><th>In</th><th>Type</th><th>Required</th><th>Meaning</th></tr></thead><tbody>
${parameters.map((parameter) => `<tr><td><code>${e(parameter.name)}</code></td><td>${e(parameter.in)}</td><td>${typeOf(parameter.schema)}</td><td>${parameter.required === true ? 'yes' : ''}</td><td>${prose(parameter.description)}</td></tr>`).join('\n')}
</tbody></table>`
}
${operation.requestBody === undefined ? '' : `<h4>Request body${operation.requestBody.required === true ? '' : ' (optional)'}</h4>\n${prose(operation.requestBody.description)}\n${mediaOf(operation.requestBody.content)}`}
<h4>Responses</h4>
<dl>
${responses.map(([status, response]) => `<dt><code>${e(status)}</code></dt><dd>${prose(response.description)}${Number(status) < 400 ? mediaOf(response.content) : ''}</dd>`).join('\n')}
</dl>
</section>`;
}

type Entry = { method: string; path: string; operation: Operation };

function entriesOf(paths: Record<string, Record<string, Operation>> | undefined): Entry[] {
  return Object.entries(paths ?? {}).flatMap(([path, item]) =>
    METHODS.filter((method) => item[method] !== undefined).map((method) => ({ method, path, operation: item[method] as Operation })),
  );
}

/** The reference page, from the OpenAPI document as `openApiDocument` makes it. */
export function staticReferencePage(urls: PublicUrls, document: Record<string, unknown>): string {
  const api = document as unknown as OpenApi;
  const base = api.servers?.[0]?.url ?? urls.apiUrl;
  const operations = entriesOf(api.paths);
  const tags = [
    ...(api.tags ?? []),
    ...[...new Set(operations.flatMap((entry) => entry.operation.tags ?? []))]
      .filter((name) => !(api.tags ?? []).some((tag) => tag.name === name))
      .map((name) => ({ name, description: undefined })),
  ];
  const byTag = tags
    .map((tag) => ({ tag, entries: operations.filter((entry) => (entry.operation.tags ?? [])[0] === tag.name) }))
    .filter((group) => group.entries.length > 0);
  const untagged = operations.filter((entry) => (entry.operation.tags ?? []).length === 0);
  if (untagged.length > 0) byTag.push({ tag: { name: 'Other', description: undefined }, entries: untagged });
  const webhooks = entriesOf(api.webhooks);
  const schemas = Object.entries(api.components?.schemas ?? {});
  const contents = byTag
    .map(
      (group) =>
        `<li>${e(group.tag.name)}<ul>${group.entries.map(({ method, path, operation }) => `<li><a href="#${e(anchorOf(method, path, operation))}">${e(operation.summary ?? path)}</a> <code>${e(method.toUpperCase())} ${e(path)}</code></li>`).join('')}</ul></li>`,
    )
    .join('\n');
  return page(
    urls,
    'API reference',
    `<h1>${e(api.info.title)} <span class="note">${e(api.info.version)}</span></h1>
${prose(api.info.description)}
<p>Base URL <code>${e(base)}</code>. From <a href="${e(urls.siteUrl)}/openapi.json">openapi.json</a> (OpenAPI 3.1); to send requests from the browser, open the <a href="${e(urls.siteUrl)}/developers/reference/interactive">interactive reference</a>.</p>
<nav aria-label="Operations"><ul>
${contents}
${webhooks.length === 0 ? '' : '<li><a href="#webhooks">Webhooks</a></li>'}
${schemas.length === 0 ? '' : '<li><a href="#schemas">Schemas</a></li>'}
</ul></nav>
${byTag.map((group) => `<h2 id="tag-${e(group.tag.name.replace(/[^A-Za-z0-9]+/g, '-'))}">${e(group.tag.name)}</h2>\n${prose(group.tag.description)}\n${group.entries.map(({ method, path, operation }) => operationSection(method, path, operation, base)).join('\n')}`).join('\n')}
${webhooks.length === 0 ? '' : `<h2 id="webhooks">Webhooks</h2>\n${webhooks.map(({ method, path, operation }) => operationSection(method, path, operation, undefined)).join('\n')}`}
${schemas.length === 0 ? '' : `<h2 id="schemas">Schemas</h2>\n${schemas.map(([name, schema]) => `<section id="schema-${e(name)}"><h3>${e(name)}</h3>\n${prose(schema.description)}\n${fieldsTable(schema)}</section>`).join('\n')}`}`,
    `${e(urls.siteUrl)}/developers/reference`,
  );
}
