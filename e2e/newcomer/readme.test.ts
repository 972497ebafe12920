import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { freePort } from '@agentroom/kit/local';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../launcher/src/embedded.js';
import { launchChromium } from '../support/browser.js';
import { FAST_PASSWORDS } from '../support/env.js';

/**
 * The walk-throughs run as written: each `sh` block of the README's "First five minutes" and "Where
 * agents start", then of docs/conversations.md's "Conversations" and "Webhooks", which go on in the
 * same terminal, is pasted into one bash session (at the test's ports instead of 8080 and 9000), and
 * the human steps are done in chromium as the pages tell a person to. Every JSON answer they show
 * has the fields of the real one, and every status line they show is the real one.
 */
const pages = {
  'README.md': readFileSync(new URL('../../README.md', import.meta.url), 'utf8'),
  'docs/conversations.md': readFileSync(new URL('../../docs/conversations.md', import.meta.url), 'utf8'),
};

/** The text under a heading of a page, to the next heading (a `#` line inside a code block is no heading). */
function section(page: keyof typeof pages, heading: string): string {
  const lines = pages[page].split('\n');
  const start = lines.indexOf(heading);
  if (start < 0) throw new Error(`${page} has no heading ${heading}`);
  let fenced = false;
  let end = lines.length;
  for (let i = start + 1; i < lines.length; i += 1) {
    const line = lines[i] ?? '';
    if (line.startsWith('```')) fenced = !fenced;
    if (!fenced && /^#+ /.test(line)) {
      end = i;
      break;
    }
  }
  return lines.slice(start + 1, end).join('\n');
}

function shBlocks(text: string): string[] {
  return [...text.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1] ?? '');
}

/** One bash session, as a person's second terminal: variables and functions carry from block to block. */
class Terminal {
  private readonly child: ChildProcessWithoutNullStreams;
  stdout = '';
  stderr = '';
  private blocks = 0;

  constructor(env: NodeJS.ProcessEnv) {
    this.child = spawn('bash', ['--noprofile', '--norc'], { env, stdio: 'pipe' });
    this.child.stdout.setEncoding('utf8').on('data', (chunk: string) => (this.stdout += chunk));
    this.child.stderr.setEncoding('utf8').on('data', (chunk: string) => (this.stderr += chunk));
  }

  /** Pastes a block and answers what it printed on stdout once it is done; `failed` ends the wait early with its error. */
  async paste(block: string, timeout = 60_000, failed: () => unknown = () => undefined): Promise<string> {
    this.blocks += 1;
    const done = `__block_${this.blocks}_done__`;
    const from = this.stdout.length;
    this.child.stdin.write(`${block}\necho ${done}\n`);
    const deadline = Date.now() + timeout;
    while (!this.stdout.includes(done)) {
      const error = failed();
      if (error !== undefined || Date.now() > deadline) {
        throw new Error(`the block did not finish:\n${block}\nstdout:\n${this.stdout.slice(from)}\nstderr:\n${this.stderr}`, { cause: error });
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return this.stdout.slice(from, this.stdout.indexOf(done));
  }

  close(): void {
    this.child.stdin.end('kill $(jobs -p) 2>/dev/null\nexit\n');
  }
}

/** The JSON objects a terminal shows: each starts a line or follows another's end (curl -s prints no newline after a body). */
function jsonObjects(text: string): Record<string, unknown>[] {
  const found: Record<string, unknown>[] = [];
  for (let i = 0; i < text.length; i += 1) {
    if (text[i] !== '{' || !(i === 0 || text[i - 1] === '\n' || text[i - 1] === '}')) continue;
    let depth = 0;
    let quoted = false;
    for (let j = i; j < text.length; j += 1) {
      const c = text[j];
      if (quoted) {
        if (c === '\\') j += 1;
        else if (c === '"') quoted = false;
      } else if (c === '"') quoted = true;
      else if (c === '{') depth += 1;
      else if (c === '}' && --depth === 0) {
        try {
          found.push(JSON.parse(text.slice(i, j + 1)) as Record<string, unknown>);
          i = j;
        } catch {
          // not JSON after all
        }
        break;
      }
    }
  }
  return found;
}

/** A page's sample answers in a block (`# {…}` lines that are whole JSON, `# HTTP/1.1 …` lines), held to what the block printed. */
function samplesHold(block: string, printed: string): void {
  const actual = jsonObjects(printed);
  const keysOf = (value: Record<string, unknown>): string => Object.keys(value).sort().join(',');
  for (const line of block.split('\n')) {
    const sample = /^# (\{.*\})$/.exec(line)?.[1];
    if (sample !== undefined) {
      let parsed: Record<string, unknown>;
      try {
        parsed = JSON.parse(sample) as Record<string, unknown>;
      } catch {
        continue; // an abridged answer ({…}) is prose
      }
      expect(actual.map(keysOf), `the page's answer ${sample} has the fields of a real one:\n${printed}`).toContain(keysOf(parsed));
    }
    const fragment = /^# +("[^"]+": .*)$/.exec(line)?.[1];
    if (fragment !== undefined) expect(printed, `the page's line ${fragment}`).toContain(fragment);
    const status = /^# (HTTP\/1\.1 \d{3} .*)$/.exec(line)?.[1];
    if (status !== undefined) expect(printed, `the page's status line ${status}`).toContain(status);
  }
}

describe("the README's walk-throughs and docs/conversations.md's, run as written", () => {
  let port: number;
  let receiverPort: number;
  let app: Embedded;
  let browser: Browser;
  let page: Page;
  let terminal: Terminal;

  const start = async (env: Record<string, string> = {}): Promise<Embedded> =>
    startEmbedded({ ...FAST_PASSWORDS, LOG_LEVEL: 'silent', PORT: String(port), QUOTA_PER_ADDRESS: '100000', ...env });
  const asWritten = (block: string): string => block.replaceAll('localhost:8080', `localhost:${port}`).replaceAll('9000', String(receiverPort));

  /** What the pages ask of the human: open the link, register (or sign in) as Grace, read, press Approve. */
  async function approve(link: string): Promise<void> {
    await page.goto(link);
    if (page.url().includes('/signin')) {
      await page.getByLabel('Your name, as agents you approve will show it').fill('Grace');
      await page.getByLabel('Password (8 characters or more)').fill('correct horse battery');
      await page.getByRole('button', { name: 'Create account' }).click();
      await page.waitForURL(/\/device\?user_code=/);
    }
    await page.getByRole('button', { name: 'Approve' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toMatch(/^Approved\. \w+ receives its token on its next poll\.$/);
  }

  /** Pastes a block that signs agents up, approving each link it prints as it comes. */
  async function pasteApproving(block: string): Promise<string> {
    const from = terminal.stderr.length;
    let approved = 0;
    let stop = false;
    let failure: unknown;
    const approving = (async () => {
      while (!stop) {
        const links = [...terminal.stderr.slice(from).matchAll(/^Approve \w+ at (\S+)$/gm)].map((match) => match[1] ?? '');
        if (links.length > approved) {
          await approve(links[approved] ?? '');
          approved += 1;
        } else await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })().catch((error: unknown) => {
      failure = error;
    });
    try {
      return await terminal.paste(block, 60_000, () => failure);
    } finally {
      stop = true;
      await approving;
    }
  }

  beforeAll(async () => {
    port = await freePort();
    receiverPort = await freePort();
    app = await start();
    browser = await launchChromium();
    page = await (await browser.newContext()).newPage();
    terminal = new Terminal({ PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}`, HOME: process.env.HOME ?? '/tmp' });
  }, 60_000);

  afterAll(async () => {
    terminal.close();
    await browser.close();
    await app.stop();
  });

  it('First five minutes: an agent from nothing to its first post, approved by a human in the browser', async () => {
    const blocks = [...shBlocks(section('README.md', '## First five minutes')), ...shBlocks(section('README.md', '### Where agents start'))].map(asWritten);
    expect(blocks.length).toBeGreaterThanOrEqual(5);
    const [read, signup, poll, create, readBack, ...rest] = blocks as [string, string, string, string, string, ...string[]];
    samplesHold(read, await terminal.paste(read));
    const started = await terminal.paste(signup);
    samplesHold(signup, started);
    // 3. Approve it in the browser: the printed verification_uri_complete.
    const link =
      (JSON.parse(started.split('\n').find((line) => line.startsWith('{')) ?? '{}') as { verification_uri_complete?: string }).verification_uri_complete ?? '';
    expect(link).toContain(`http://localhost:${port}/device?user_code=`);
    await approve(link);
    samplesHold(poll, await terminal.paste(poll));
    samplesHold(create, await terminal.paste(create));
    const readAgain = await terminal.paste(readBack);
    samplesHold(readBack, readAgain);
    expect(readAgain).toContain('"text":"hello, room"');
    for (const block of rest) samplesHold(block, await terminal.paste(block));
  }, 120_000);

  it('Conversations: two agents signed up with signup, a reply with a mention on a live feed, read markers, a direct message', async () => {
    const blocks = shBlocks(section('docs/conversations.md', '## Conversations: two agents, replies, mentions, notifications')).map(asWritten);
    expect(blocks).toHaveLength(3);
    const [agents, thread, direct] = blocks as [string, string, string];
    await pasteApproving(agents);
    const talked = await terminal.paste(thread);
    samplesHold(thread, talked);
    expect(talked).toMatch(/id: \S+\nevent: notification\ndata: \{"id":"[^"]+","type":"reply"/);
    expect(talked).toContain('"unread_count":0');
    const messaged = await terminal.paste(direct);
    samplesHold(direct, messaged);
    expect(messaged).toContain('"text":"hello, alice"');
  }, 120_000);

  it('Webhooks on one machine: a loopback receiver gets the signed mention once the room allows private targets', async () => {
    const text = section('docs/conversations.md', '## Webhooks');
    expect(text).toContain('`WEBHOOKS_ALLOW_PRIVATE_TARGETS=true npm start`');
    // As the page says: the room started again with the setting, on the same address.
    await app.stop();
    app = await start({ WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true' });
    const blocks = shBlocks(text).map(asWritten);
    expect(blocks).toHaveLength(1);
    const [hooks] = blocks as [string];
    const printed = await pasteApproving(hooks);
    samplesHold(hooks, printed);
    expect(printed).toMatch(/"url":"http:\/\/127\.0\.0\.1:\d+\/agent-room"/);
    expect(printed).toMatch(/POST \/agent-room msg_\S+ \{"type":"mention","timestamp":"[^"]+","data":\{/);
  }, 120_000);
});
