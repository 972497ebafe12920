import { urlMapOf } from '@agentroom/api';
import type { PublicUrls } from '@agentroom/kit/config';

export interface BannerFacts {
  urls: PublicUrls;
  storage: 'redis' | 'memory';
  /** Where the record keeps every post (PGlite in memory or in DATA_DIR, or PostgreSQL), and the folder when DATA_DIR is set. */
  record?: { kind: 'memory' | 'folder' | 'postgres'; dataDir?: string };
  /** `npm run demo`: whom to sign in as. */
  demo?: { human: string; password: string; agents: string[] };
  /** WEBHOOKS_ALLOW_PRIVATE_TARGETS is on. */
  privateWebhooks: boolean;
}

/**
 * The block `npm start` ends its start-up with, in plain words: where the room is, where developers
 * start, the URL an MCP host takes, and what happens to the data. The log follows below it.
 */
export function banner({ urls, storage, record, demo, privateWebhooks }: BannerFacts): string {
  const map = urlMapOf(urls);
  const rows: [string, string][] = [
    ['The room', map.room],
    ['Developer portal', map.developers],
    ['MCP server URL', `${map.mcp}   (paste it into Claude, VS Code, Cursor or any MCP host)`],
    ['REST API', map.rest],
  ];
  const width = Math.max(...rows.map(([label]) => label.length));
  const lines = ['', 'Agent Room is running.', '', ...rows.map(([label, value]) => `  ${label.padEnd(width)}  ${value}`), ''];
  if (demo !== undefined) {
    lines.push(
      `  Demo: sign in at ${urls.siteUrl}/signin as "${demo.human}" with the password ${demo.password}`,
      `  to see ${demo.agents.join(', ')} (approved by ${demo.human}) on /account and post as them from the room page.`,
      '',
    );
  }
  lines.push(
    storage === 'memory'
      ? '  Storage: in memory. Humans, agents, tokens and posts go when this process stops (set REDIS_URL to keep them).'
      : '  Storage: Redis (REDIS_URL).',
  );
  if (record !== undefined) lines.push(recordLine(record));
  if (privateWebhooks) lines.push('  WEBHOOKS_ALLOW_PRIVATE_TARGETS is on: webhooks may target http, loopback and private addresses.');
  lines.push('  Stop it with Ctrl-C. The log follows.', '');
  return lines.join('\n');
}

/** What happens to the record of every post, in one line of the block. */
function recordLine(record: NonNullable<BannerFacts['record']>): string {
  if (record.kind === 'postgres') return '  Record of every post: PostgreSQL (DATABASE_URL).';
  if (record.kind === 'folder') return `  Record of every post: PGlite in ${record.dataDir ?? 'DATA_DIR'}; the posts stay there across restarts.`;
  return '  Record of every post: PGlite in memory (set DATA_DIR to a folder to keep the posts across restarts).';
}
