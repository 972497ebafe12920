import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MCP_TOOL_OPERATIONS } from '@agentroom/api';
import { freePort } from '@agentroom/kit/local';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));

/** The MCP Inspector's `mcp-inspector` bin: `--cli` runs its command-line client in the same process. */
const inspectorBin = createRequire(import.meta.url).resolve('@modelcontextprotocol/inspector/clients/launcher/build/index.js');
/** Where the Inspector keeps its catalog and state (by default under ~/.mcp-inspector): a folder of this test's own. */
const inspectorHome = mkdtempSync(join(tmpdir(), 'agentroom-inspector-'));

/** Every tool the operation table carries. */
const TOOLS = Object.keys(MCP_TOOL_OPERATIONS);

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `mcp-inspector --cli <url> --transport http ...`, as its README shows; JSON on stdout. */
function inspector(url: string, args: string[]): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [inspectorBin, '--cli', url, '--transport', 'http', ...args], {
      env: { ...process.env, MCP_STORAGE_DIR: join(inspectorHome, 'storage'), MCP_CATALOG_PATH: join(inspectorHome, 'mcp.json') },
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 30_000,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

function json<T>(run: Run): T {
  expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
  return JSON.parse(run.stdout) as T;
}

/**
 * What an MCP user tries first: `npm start` (which runs `node launcher/dist/start.js` once built;
 * `npm test` builds first), then the MCP Inspector's CLI against its MCP address.
 */
describe('the MCP Inspector CLI against npm start', () => {
  let server: ChildProcess;
  let exited: Promise<number | null>;
  let mcpUrl: string;
  let out = '';

  beforeAll(async () => {
    const port = await freePort();
    // REDIS_URL empty: the in-memory default, so the room starts empty whatever the shell has set.
    server = spawn(process.execPath, ['launcher/dist/start.js'], {
      cwd: root,
      env: { ...process.env, PORT: String(port), LOG_LEVEL: 'info', REDIS_URL: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    exited = new Promise<number | null>((resolve) => server.once('exit', resolve));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`Agent Room did not start in time:\n${out}`)), 20_000);
      server.stdout?.on('data', (chunk: Buffer) => {
        out += chunk.toString('utf8');
        if (out.includes('Agent Room is running')) {
          clearTimeout(timer);
          resolve();
        }
      });
      server.stderr?.on('data', (chunk: Buffer) => {
        out += chunk.toString('utf8');
      });
      void exited.then((code) => {
        clearTimeout(timer);
        reject(new Error(`Agent Room exited with ${code}:\n${out}`));
      });
    });
    mcpUrl = `http://localhost:${port}/api/mcp`;
  });

  afterAll(async () => {
    rmSync(inspectorHome, { recursive: true, force: true });
    if (server.exitCode === null && server.signalCode === null) server.kill('SIGTERM');
    expect(await exited).toBe(0);
  });

  it('lists every room tool, with no schema the Inspector calls an error (`--strict` exits 6 on one)', async () => {
    const listed = json<{ tools: { name: string; description?: string; inputSchema: { type: string } }[] }>(
      await inspector(mcpUrl, ['--method', 'tools/list', '--strict']),
    );
    expect(listed.tools.map((tool) => tool.name).sort()).toEqual([...TOOLS].sort());
    for (const tool of listed.tools) {
      expect(tool.inputSchema.type, tool.name).toBe('object');
      expect(tool.description?.length ?? 0, tool.name).toBeGreaterThan(0);
    }
  });

  it('calls room_read_posts without a token and gets a post list as structuredContent', async () => {
    const result = json<{ isError?: boolean; content: { type: string; text?: string }[]; structuredContent?: Record<string, unknown> }>(
      await inspector(mcpUrl, ['--method', 'tools/call', '--tool-name', 'room_read_posts', '--tool-arg', 'limit=2']),
    );
    expect(result.isError ?? false).toBe(false);
    expect(result.content[0]?.type).toBe('text');
    // A fresh in-memory room has no posts, and posting needs a token: the list is empty.
    expect(result.structuredContent).toEqual({ object: 'list', data: [], has_more: false, next_cursor: null });
  });
});
