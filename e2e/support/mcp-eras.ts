import { InsufficientScopeError, Client as ModernClient, SdkHttpError, StreamableHTTPClientTransport as ModernTransport } from '@modelcontextprotocol/client';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import type { Embedded } from '../../launcher/src/embedded.js';
import type { Problem } from './agent.js';

/** The two revisions `{api_url}/mcp` serves, each spoken by the SDK's own client of it. */
export const ERAS = ['2025-11-25', '2026-07-28'] as const;
export type Era = (typeof ERAS)[number];

/** What both clients answer, in the shape the tests read (the 2026-07-28 cache hints when present). */
export interface ResourceEntry {
  uri: string;
  name: string;
  title?: string;
  mimeType?: string;
}
export interface TemplateEntry {
  uriTemplate: string;
  name: string;
  title?: string;
  description?: string;
  mimeType?: string;
}
export interface Cacheable {
  ttlMs?: number;
  cacheScope?: string;
}
export interface ReadAnswer extends Cacheable {
  contents: { uri: string; mimeType?: string; text?: string }[];
}
export interface PromptEntry {
  name: string;
  title?: string;
  description?: string;
  arguments?: { name: string; description?: string; required?: boolean }[];
}
export interface PromptAnswer {
  description?: string;
  messages: { role: string; content: { type: string; text?: string; resource?: { uri: string; mimeType?: string; text?: string } } }[];
}

/**
 * A refusal as the client saw it: an HTTP status before any JSON-RPC (with the body, or, where the
 * v2 client reads a 403's challenge itself, the scope it asks for), or a JSON-RPC error.
 */
export type Refusal = { kind: 'http'; status: number; body: string; challengeScope?: string } | { kind: 'rpc'; code: number; message: string; data: unknown };

export interface EraClient {
  era: Era;
  listResources(): Promise<{ resources: ResourceEntry[] } & Cacheable>;
  listResourceTemplates(): Promise<{ resourceTemplates: TemplateEntry[] } & Cacheable>;
  readResource(uri: string): Promise<ReadAnswer>;
  listPrompts(): Promise<{ prompts: PromptEntry[] } & Cacheable>;
  getPrompt(name: string, args?: Record<string, string>): Promise<PromptAnswer>;
  /** What the server declared it offers (initialize's, or server/discover's answer). */
  capabilities(): Record<string, unknown> | undefined;
  /** The refusal a call answers; throws when it succeeds. */
  refusal(call: (client: EraClient) => Promise<unknown>): Promise<Refusal>;
  close(): Promise<void>;
}

function headersOf(token: string | undefined): RequestInit | undefined {
  return token === undefined ? undefined : { headers: { authorization: `Bearer ${token}` } };
}

/**
 * An MCP client of `era` at `{api_url}/mcp`, with a bearer token if given: the SDK 1.32 client for
 * 2025-11-25, the v2 client pinned to 2026-07-28 (never serving from its cache, so each call asks).
 */
export async function eraClient(app: Embedded, era: Era, token?: string): Promise<EraClient> {
  const url = new URL(`${app.urls.apiUrl}/mcp`);
  const requestInit = headersOf(token);
  let adapter: Omit<EraClient, 'refusal'>;
  if (era === '2025-11-25') {
    const client = new LegacyClient({ name: 'test-host', version: '1.0.0' });
    await client.connect(new LegacyTransport(url, requestInit ? { requestInit } : undefined));
    adapter = {
      era,
      listResources: () => client.listResources(),
      listResourceTemplates: () => client.listResourceTemplates(),
      readResource: (uri) => client.readResource({ uri }) as Promise<ReadAnswer>,
      listPrompts: () => client.listPrompts(),
      getPrompt: (name, args) => client.getPrompt({ name, ...(args ? { arguments: args } : {}) }) as Promise<PromptAnswer>,
      capabilities: () => client.getServerCapabilities(),
      close: () => client.close(),
    };
  } else {
    const client = new ModernClient({ name: 'test-host', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    await client.connect(new ModernTransport(url, requestInit ? { requestInit } : undefined));
    adapter = {
      era,
      listResources: () => client.listResources(undefined, { cacheMode: 'bypass' }),
      listResourceTemplates: () => client.listResourceTemplates(undefined, { cacheMode: 'bypass' }),
      readResource: (uri) => client.readResource({ uri }, { cacheMode: 'bypass' }) as Promise<ReadAnswer>,
      listPrompts: () => client.listPrompts(undefined, { cacheMode: 'bypass' }),
      getPrompt: (name, args) => client.getPrompt({ name, ...(args ? { arguments: args } : {}) }) as Promise<PromptAnswer>,
      capabilities: () => client.getServerCapabilities(),
      close: () => client.close(),
    };
  }
  const self: EraClient = {
    ...adapter,
    async refusal(call) {
      try {
        await call(self);
      } catch (error) {
        if (error instanceof StreamableHTTPError) return { kind: 'http', status: error.code ?? 0, body: error.message.slice(error.message.indexOf('{')) };
        if (error instanceof InsufficientScopeError) return { kind: 'http', status: 403, body: '', challengeScope: error.requiredScope ?? '' };
        if (error instanceof SdkHttpError) return { kind: 'http', status: error.status, body: JSON.stringify(error.data) + error.message };
        if (error instanceof McpError) return { kind: 'rpc', code: error.code, message: error.message, data: error.data };
        const rpc = error as { code?: unknown; message?: unknown; data?: unknown };
        if (typeof rpc.code === 'number') return { kind: 'rpc', code: rpc.code, message: String(rpc.message), data: rpc.data };
        throw error;
      }
      throw new Error('expected the call to be refused');
    },
  };
  return self;
}

/** The problem document an HTTP-level refusal carries in its JSON-RPC error's data. */
export function refusalProblem(refusal: Refusal): Problem {
  if (refusal.kind === 'rpc') return refusal.data as Problem;
  const start = refusal.body.indexOf('{"jsonrpc"');
  if (start < 0) throw new Error(`no JSON-RPC error in ${refusal.body.slice(0, 300)}`);
  const parsed = JSON.parse(refusal.body.slice(start, refusal.body.lastIndexOf('}') + 1)) as { error: { code: number; data: Problem } };
  return parsed.error.data;
}

/** What a suite of both eras shares: REST reads to compare with, and the clients it opened, closed together. */
export interface EraSuite {
  /** A REST read's JSON, which must answer 200. */
  rest(path: string, token?: string): Promise<unknown>;
  client(era: Era, token?: string): Promise<EraClient>;
  close(): Promise<void>;
}

/** An EraSuite against the product `app()` names (set in the suite's beforeAll). */
export function eraSuite(app: () => Embedded): EraSuite {
  const clients: EraClient[] = [];
  return {
    async rest(path, token) {
      const answer = await fetch(`${app().urls.baseUrl}${path}`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
      if (answer.status !== 200) throw new Error(`GET ${path} answered ${answer.status}: ${(await answer.text()).slice(0, 300)}`);
      return answer.json();
    },
    async client(era, token) {
      const made = await eraClient(app(), era, token);
      clients.push(made);
      return made;
    },
    async close() {
      for (const one of clients.splice(0)) await one.close();
    },
  };
}
