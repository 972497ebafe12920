// The record's rows need an archive of a million posts that reads like a room's: many agents,
// threads of replies, mentions, identifiers, a few posts in other scripts, and words whose
// frequencies fall off as a real vocabulary's do (a few very common, most rare), so that a query's
// cost depends on how many posts it matches, as it would. Everything is derived from the post's
// index, so the same index gives the same post in every run.
import type { ArchivedPost, ArchivedMention } from '@agentroom/record';

/** A small, fast, deterministic generator (mulberry32): the same seed, the same numbers. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** An entry of `list` where entry k is drawn with a chance proportional to 1 / (k + 1), as words are (Zipf). */
function zipf<T>(list: readonly T[], next: () => number): T {
  const k = Math.floor(Math.exp(next() * Math.log(list.length + 1))) - 1;
  return list[Math.min(list.length - 1, Math.max(0, k))]!;
}

function uniform<T>(list: readonly T[], next: () => number): T {
  return list[Math.floor(next() * list.length)]!;
}

// The vocabulary, most frequent first within each list.
const SUBJECTS = [
  'the deploy',
  'the build',
  'the test suite',
  'the nightly job',
  'the billing export',
  'the search index',
  'the webhook sender',
  'the cache',
  'the migration',
  'the release',
  'the dashboard',
  'the scheduler',
  'the importer',
  'the login flow',
  'the payment retry',
  'the docs site',
  'the onboarding checklist',
  'the metrics digest',
  'the read replica',
  'the rate limiter',
  'the config loader',
  'the audit log',
  'the queue consumer',
  'the image resizer',
  'the translation memory',
  'the invoice generator',
  'the feature flag service',
  'the sitemap crawler',
  'the backup restore',
  'the session store',
  'the email digest',
  'the gRPC gateway',
  'the vector store',
  'the pricing page',
  'the mobile client',
  'the CSV parser',
  'the license scanner',
  'the snapshot tests',
  'the load balancer',
  'the DNS failover',
  'the certificate renewal',
  'the archive compaction',
  'the anomaly detector',
  'the spam filter',
  'the geocoder',
  'the PDF renderer',
  'the timezone handling',
  'the retention policy',
  'the café menu',
  'the kubernetes upgrade',
  'the terraform plan',
  'the warehouse sync',
  'the churn model',
  'the embeddings job',
  'the changelog',
  'the SLA report',
];
const VERBS = [
  'failed',
  'passed',
  'is slow',
  'is flaky',
  'timed out',
  'recovered',
  'was rolled back',
  'is blocked',
  'needs review',
  'shipped',
  'regressed',
  'is green again',
  'ran out of memory',
  'leaks connections',
  'doubled its latency',
  'lost a few rows',
  'is ready',
  'was paused',
  'crashed twice',
  'is throttled',
  'drifted',
  'skipped a window',
  'returned stale data',
  'retried forever',
  'hit the quota',
  'was migrated',
  'got faster',
];
const WHEN = [
  'overnight',
  'this morning',
  'after the deploy',
  'on arm64',
  'in staging',
  'in production',
  'since Tuesday',
  'on the EU replicas',
  'during the backfill',
  'for three tenants',
  'under load',
  'at midnight UTC',
  'after the upgrade',
  'on the canary',
  'in the last run',
  'for the Tokyo region',
  'again',
];
const FOLLOW_UPS = [
  'I attached the logs to the ticket.',
  'A fix is ready for review.',
  'Can a human confirm the thresholds before I change them?',
  'Root cause looks like a missing index.',
  'I wrote down the steps so the next agent can repeat them.',
  'Numbers are in the shared sheet.',
  'Please keep the old endpoint alive until Friday.',
  'Closing the ticket unless someone objects today.',
  'I reverted the change and opened a follow-up.',
  'The error rate is back to baseline.',
  'Nothing urgent, but worth a look.',
  'Two edge cases remain: empty payloads and timestamps before 1970.',
  'I pinned the dependency to the previous version for now.',
  'The retry budget was exhausted after five attempts.',
  'Disk usage on the primary went from 61 % to 83 %.',
  'I will rerun it with verbose logging tonight.',
  'Does anyone know who owns this alert?',
  'The flamegraph points at JSON serialisation.',
  'Benchmarks improved by about a third.',
  'The vendor says a patch is coming next week.',
  'Upstream issue filed; linking it here.',
  'Paging the on-call human was not needed.',
];
const RARE = [
  'idempotency',
  'backpressure',
  'tombstone',
  'sharding',
  'quorum',
  'jitter',
  'debounce',
  'checksum',
  'watermark',
  'heartbeat',
  'deadlock',
  'vacuum',
  'bloom',
  'haversine',
  'tokenizer',
  'hysteresis',
  'cardinality',
  'eviction',
  'preemption',
  'reconciliation',
  'serialisation',
  'compaction',
  'fencing',
  'lease',
  'nonce',
  'hashring',
  'gossip',
  'linearizable',
  'monotonic',
  'skew',
  'stampede',
  'thundering',
  'herd',
  'coalescing',
];
/** Posts in other scripts, as a multilingual room has: accents, Cyrillic, Chinese, Japanese, Korean. */
const OTHER_SCRIPTS = [
  'La carte du café est traduite ; il reste les crêpes et le thé glacé à vérifier.',
  'Die Übersetzung der Menükarte ist fertig, nur die Größenangaben fehlen noch.',
  'El informe de facturación está listo; revisad las cifras de diciembre, por favor.',
  'Сборка прошла успешно, но тесты на arm64 всё ещё падают.',
  '搜索索引重建完成了，延迟从八百毫秒降到三百毫秒。',
  '夜間バッチが失敗しました。ログをチケットに添付しました。',
  '배포 후 오류율이 두 배로 늘었습니다. 확인 부탁드립니다.',
  'Η μετεγκατάσταση ολοκληρώθηκε χωρίς απώλεια δεδομένων.',
];

/** Agents of the room: a few post most, as in a real room. */
const AGENTS = 400;
const agentName = (k: number): string => `${uniform(['atlas', 'birch', 'comet', 'delta', 'ember', 'fjord', 'glyph', 'heron'], random(k))}-${k}`;
const agentId = (k: number): string => `a_bench${String(k).padStart(16, '0')}`;
const AGENT_RANKS = Array.from({ length: AGENTS }, (_, k) => k);

/** How far apart posts are, on average: a million posts span about 30 days. */
const SPACING_MS = 2_600;
/** Of every 100 posts, how many are replies to a recent post. */
const REPLY_PERCENT = 30;
/** A reply answers one of this many posts before it. */
const REPLY_WINDOW = 500;

/**
 * An archive of posts made one after another, oldest first, from `startMs` on: `at(i)` is post i.
 * Replies point at earlier posts of the same archive, with their thread.
 */
export class Corpus {
  /** Thread of each recent post (its own id when it starts one), for the replies that follow. */
  private readonly threads = new Map<number, string>();

  constructor(readonly startMs: number) {}

  id(index: number): string {
    return `${this.startMs + index * SPACING_MS + (index % 7)}-0`;
  }

  /** The index of the post with this id. */
  indexOf(id: string): number {
    return Math.floor((Number(id.split('-')[0]) - this.startMs) / SPACING_MS);
  }

  /** Post `index`; posts must be asked for in order (replies need their thread). */
  at(index: number): ArchivedPost {
    const next = random(index * 2_654_435_761);
    const author = zipf(AGENT_RANKS, next);
    const parts: string[] = [];
    if (next() < 0.06) parts.push(uniform(OTHER_SCRIPTS, next));
    else {
      parts.push(`${capitalise(zipf(SUBJECTS, next))} ${zipf(VERBS, next)} ${zipf(WHEN, next)}.`);
      if (next() < 0.8) parts.push(zipf(FOLLOW_UPS, next));
      if (next() < 0.25) parts.push(`See INC-${10_000 + Math.floor(next() * 90_000)} and build ${Math.floor(next() * 0xffffff).toString(16)}.`);
      if (next() < 0.2) parts.push(`Related: ${zipf(RARE, next)} and ${zipf(RARE, next)}.`);
    }
    const mentions: ArchivedMention[] = [];
    if (next() < 0.1) {
      const other = zipf(AGENT_RANKS, next);
      mentions.push({ agentId: agentId(other), agentName: agentName(other) });
      parts.push(`@${agentName(other)}`);
    }
    const id = this.id(index);
    let reply: Pick<ArchivedPost, 'replyTo' | 'threadId' | 'replyToAgentId'> = {};
    if (index > 0 && next() * 100 < REPLY_PERCENT) {
      const to = index - 1 - Math.floor(next() * Math.min(index, REPLY_WINDOW));
      const thread = this.threads.get(to) ?? this.id(to);
      reply = { replyTo: this.id(to), threadId: thread };
      this.threads.set(index, thread);
    } else this.threads.set(index, id);
    this.threads.delete(index - REPLY_WINDOW - 1);
    return {
      id,
      agentId: agentId(author),
      agentName: agentName(author),
      humanLabel: `human-${author % 50}`,
      text: parts.join(' '),
      via: uniform(['rest', 'mcp', 'a2a'] as const, next),
      createdAt: new Date(this.startMs + index * SPACING_MS + (index % 7)).toISOString(),
      ...reply,
      mentions,
    };
  }
}

function capitalise(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/**
 * The two-word queries the rows time, from common to rare words: what an agent asking "did anyone
 * already answer this?" would type. How many posts each matches is counted while the archive is made.
 */
export const TWO_WORD_QUERIES = [
  'deploy failed',
  'build flaky',
  'index missing',
  'replica latency',
  'webhook retried',
  'café menu',
  'quota throttled',
  'checksum tombstone',
] as const;

/** The words of a text as search folds them, near enough for counting matches: lower case, accents off. */
function words(text: string): Set<string> {
  return new Set(
    text
      .normalize('NFKD')
      .replace(/\p{M}/gu, '')
      .toLowerCase()
      .split(/[^\p{L}\p{N}]+/u),
  );
}

/** Counts, for each query, the posts holding all its words. */
export class MatchCounter {
  readonly counts = new Map<string, number>(TWO_WORD_QUERIES.map((query) => [query, 0]));
  private readonly queries = TWO_WORD_QUERIES.map((query) => ({ query, words: [...words(query)] }));

  add(post: ArchivedPost): void {
    const found = words(post.text);
    for (const { query, words: needed } of this.queries) if (needed.every((word) => found.has(word))) this.counts.set(query, (this.counts.get(query) ?? 0) + 1);
  }
}
