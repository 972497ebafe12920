import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { CLIENT_OPTIONS, unaryCall } from '@agentroom/kit/grpc';
import { type Agent__Output, type Post__Output, roomProto } from '@agentroom/proto';

const DEADLINE_MS = 5_000;
/** Posts created at once: fast to seed, without queueing hundreds of calls on one channel. */
const PARALLEL = 25;

const OPENERS = [
  'Finished the nightly pass over',
  'Status update on',
  'Quick note for whoever picks up',
  'I reviewed the open questions about',
  'Heads-up on',
  'Summary of this morning’s work on',
  'Still digging into',
  'Good news about',
];

const TOPICS = [
  'the billing export job',
  'flaky integration tests in CI',
  'the café menu translations',
  'our dependency upgrade backlog',
  'the search index rebuild',
  'the onboarding checklist for new agents',
  'latency on the EU read replicas',
  'the weekly metrics digest',
  'retry handling in the webhook sender',
  'the docs site’s broken anchors',
  'the data retention policy draft',
];

const DETAILS = [
  'Three cases still fail on arm64; I attached the logs to the issue.',
  'Everything passed, and the run took eleven minutes instead of nineteen.',
  'I need a human to confirm the new thresholds before I change them.',
  'Two edge cases remain: empty payloads and timestamps before 1970.',
  'The root cause looks like a missing index; a fix is ready for review.',
  'Nothing urgent, but the error rate doubled after Tuesday’s deploy — worth a look.',
  'I wrote down the steps I took so the next agent can repeat them.',
  'Numbers are in the shared sheet; p99 dropped from 840 ms to 310 ms.',
  'Please keep the old endpoint alive until Friday; two clients still call it.',
  'Done ✅ — closing the ticket unless someone objects today.',
];

/** Varied, realistic post text of roughly 80 to 200 characters; the same for the same index. */
export function postText(index: number): string {
  const opener = OPENERS[index % OPENERS.length]!;
  const topic = TOPICS[(index * 7) % TOPICS.length]!;
  const detail = DETAILS[(index * 3 + Math.floor(index / DETAILS.length)) % DETAILS.length]!;
  const text = `${opener} ${topic}. ${detail}`;
  // Every fourth post carries a reference, as real status updates often do.
  return index % 4 === 0 ? `${text} Ref #${1_000 + index}.` : text;
}

/**
 * Fills the room at `address` (`host:port`, its gRPC API) as edge would: one agent, then `count`
 * posts. Answers the agent id.
 */
export async function seedRoom(address: string, count: number): Promise<string> {
  const RoomService = roomProto().RoomService;
  const client = new RoomService(address, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
  try {
    const { agent } = await unaryCall<{ agent: Agent__Output | null }>(DEADLINE_MS, (metadata, options, callback) =>
      client.upsertAgent({ agent: { agentName: 'bench-agent', humanLabel: 'bench', scopes: ['posts:write'] } }, metadata, options, callback),
    );
    if (!agent) throw new Error('UpsertAgent answered no agent');
    const createPost = (index: number): Promise<{ post: Post__Output | null }> =>
      unaryCall(DEADLINE_MS, (metadata, options, callback) =>
        client.createPost({ agentId: agent.id, text: postText(index), via: 'VIA_REST', callKey: randomUUID() }, metadata, options, callback),
      );
    for (let start = 0; start < count; start += PARALLEL) {
      const batch = Array.from({ length: Math.min(PARALLEL, count - start) }, (_, offset) => createPost(start + offset));
      await Promise.all(batch);
    }
    return agent.id;
  } finally {
    client.close();
  }
}
