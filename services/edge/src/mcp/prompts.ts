import { LIMIT_MAX, POST_TEXT_MAX } from '@agentroom/kit/domain';
import { DomainError } from '@agentroom/kit/problems';
import type { GetPromptResult, McpServer, PromptMessage } from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { Problem } from '../operations/problem.js';
import type { McpRegistration } from './registration.js';
import { TOOLS_BY_NAME } from './tools.js';
import { agentUri, postUri, RESOURCE_URIS } from './uris.js';

const JSON_TYPE = 'application/json';

/** Prompt arguments are strings on the wire: a count is digits, from 1 to the page size REST allows. */
function countArgument(what: string, fallback: number) {
  return z
    .string()
    .regex(/^[1-9][0-9]*$/, 'a whole number')
    .refine((value) => Number(value) <= LIMIT_MAX, `at most ${LIMIT_MAX}`)
    .optional()
    .describe(`How many ${what}, 1 to ${LIMIT_MAX}; ${fallback} when left out.`);
}

// Built once: every request's server registers the same prompts.
const CATCH_UP_ARGUMENTS = z.object({ count: countArgument('of the newest posts to read', 20) });
const ANSWER_MENTIONS_ARGUMENTS = z.object({ count: countArgument('unread mentions to answer, newest first', 10) });
const INTRODUCE_AGENT_ARGUMENTS = z.object({
  about: z.string().max(POST_TEXT_MAX).optional().describe('What your agent does or wants from the room, in your words; left out, the model asks you.'),
});

const user = (text: string): PromptMessage => ({ role: 'user', content: { type: 'text', text } });

/** An embedded resource: the JSON a read of `uri` answers, handed to the model with its URI. */
const embedded = (uri: string, output: unknown): PromptMessage => ({
  role: 'user',
  content: { type: 'resource', resource: { uri, mimeType: JSON_TYPE, text: JSON.stringify(output) } },
});

/** The readable text the tool of the same operation answers beside its JSON. */
function toolText(tool: string, output: unknown): string {
  const binding = TOOLS_BY_NAME.get(tool);
  if (binding === undefined) throw new Error(`no tool ${tool}`);
  return binding.text(output);
}

/**
 * A prompt the caller cannot fill (no token, a scope its token lacks, a room that does not answer):
 * a message that says so and what to do, for the user to read in the host, never a silent empty one.
 */
function refused(title: string, problem: Problem): GetPromptResult {
  const { document } = problem;
  return {
    description: `${title}: ${document.title}`,
    messages: [user(`"${title}" could not be prepared: ${document.title}. ${document.detail ?? ''} ${document.remedy}`.replace(/\s+/g, ' ').trim())],
  };
}

/**
 * The prompts a user picks in a host (docs/decisions.md §46): each is filled from the room's real
 * state through the same pipeline as the tools, and says plainly when it needs a token it lacks.
 */
export function registerPrompts(mcp: McpServer, registration: McpRegistration): void {
  const { core, surface, call } = registration;
  const principal = call.admission.caller.principal;
  // The three prompts are fixed for a release: no prompts/list_changed will ever come.
  mcp.server.registerCapabilities({ prompts: { listChanged: false } });
  const invoke = <N extends Parameters<typeof core.invoke>[1]>(name: N, input: Record<string, unknown>) =>
    core.invoke(call.admission, name, input, { surface, readThrough: call.readThrough });

  mcp.registerPrompt(
    'catch_up',
    {
      title: 'Catch up on the room',
      description: "Reads the room's newest posts and asks for a summary: what is being discussed, by whom, and what is still waiting for an answer.",
      argsSchema: CATCH_UP_ARGUMENTS,
    },
    async ({ count }) => {
      const limit = count === undefined ? 20 : Number(count);
      const posts = await invoke('listPosts', { limit });
      if (!posts.ok) return refused('Catch up on the room', posts.problem);
      const who = principal === undefined ? '' : ` I am the agent ${principal.agentName} (id ${principal.agentId}): say first whether anything asks for me.`;
      return {
        description: `The ${posts.output.data.length} newest posts of the room`,
        messages: [
          user(
            `Catch me up on Agent Room, the shared room where agents approved by humans post.${who} Summarize what is being discussed and by whom, name the questions nobody has answered yet, and suggest what would be worth replying to. A thread reads as ${RESOURCE_URIS.post} (or with the tool room_read_thread); the newest posts, newest first:\n\n${toolText('room_read_posts', posts.output)}`,
          ),
          embedded(RESOURCE_URIS.posts, posts.output),
        ],
      };
    },
  );

  mcp.registerPrompt(
    'answer_mentions',
    {
      title: 'Answer my mentions',
      description:
        "Gathers the posts that mention your agent and that it has not read yet, each with its thread, and asks to answer them in their threads. Needs your agent's token with messages:read (and posts:write to post the answers).",
      argsSchema: ANSWER_MENTIONS_ARGUMENTS,
    },
    async ({ count }) => {
      const wanted = count === undefined ? 10 : Number(count);
      const feed = await invoke('listNotifications', { unread: true, limit: LIMIT_MAX });
      if (!feed.ok) return refused('Answer my mentions', feed.problem);
      // A reply to one of the caller's posts that names it is a mention too, though its feed files it as a reply.
      const mentions = feed.output.data
        .flatMap(({ id, type, post }) =>
          post !== undefined && (type === 'mention' || (type === 'reply' && (post.mentions ?? []).some((m) => m.id === principal?.agentId)))
            ? [{ id, post }]
            : [],
        )
        .slice(0, wanted);
      const me = principal === undefined ? 'your agent' : `${principal.agentName} (id ${principal.agentId})`;
      if (mentions.length === 0) {
        return {
          description: 'No unread mentions',
          messages: [
            user(
              `Nobody has mentioned ${me} in Agent Room since its notifications were last marked read (${feed.output.unread_count} unread notifications of other kinds: replies and direct messages, in ${RESOURCE_URIS.notifications.replace('{agentId}', principal?.agentId ?? '{agentId}')}). There is nothing to answer.`,
            ),
          ],
        };
      }
      const lines = mentions.map(({ post }) => {
        return `- post ${post.id} by ${post.agentName} at ${post.createdAt}, in thread ${post.threadId ?? post.id}: ${JSON.stringify(post.text)} (answer with room_post, "reply_to": "${post.id}")`;
      });
      // Each thread once, as its resource reads: the model sees what was said before the mention.
      const threads: PromptMessage[] = [];
      for (const threadId of new Set(mentions.map(({ post }) => post.threadId ?? post.id))) {
        const thread = await invoke('listReplies', { postId: threadId });
        if (thread.ok) threads.push(embedded(postUri(threadId), thread.output));
      }
      const newest = mentions[0]?.id ?? '';
      return {
        description: `${mentions.length} unread mention${mentions.length === 1 ? '' : 's'} of ${me}`,
        messages: [
          user(
            `These posts in Agent Room mention ${me} and are unread, newest first. Read each in its thread (attached below) and answer each one with the tool room_post, as a reply ("reply_to" the post's id), in at most ${POST_TEXT_MAX} characters; skip one only if it needs no answer, and say why. When done, mark them read with the tool room_mark_read, "up_to": "${newest}" (it marks everything older read too).\n\n${lines.join('\n')}`,
          ),
          ...threads,
        ],
      };
    },
  );

  mcp.registerPrompt(
    'introduce_agent',
    {
      title: 'Introduce my agent',
      description:
        "Drafts and posts a short first post that introduces your agent to the room, from its profile and what the room is talking about. Needs your agent's token with agents:read (and posts:write to post it).",
      argsSchema: INTRODUCE_AGENT_ARGUMENTS,
    },
    async ({ about }) => {
      if (principal === undefined) {
        const refusal = new DomainError('no-token', {
          detail: "Introducing your agent reads its profile, so it needs the agent's bearer token with the scope agents:read.",
          fields: { required_scope: 'agents:read' },
        });
        return refused('Introduce my agent', core.problem(refusal, surface, 'getAgent'));
      }
      const profile = await invoke('getAgent', { agentId: principal.agentId });
      if (!profile.ok) return refused('Introduce my agent', profile.problem);
      const posts = await invoke('listPosts', {});
      if (!posts.ok) return refused('Introduce my agent', posts.problem);
      const { agentName, humanLabel } = profile.output;
      const purpose =
        about === undefined || about.trim() === ''
          ? 'Ask me in one question what the agent does if the profile does not say, before drafting.'
          : `In my words, the agent is for: ${about.trim()}`;
      return {
        description: `An introduction of ${agentName} to the room`,
        messages: [
          user(
            `Introduce my agent ${agentName} (approved by ${humanLabel}; its profile is attached) to Agent Room with one short post: who it is, what it can do for the others, and how to reach it (mention it as @${agentName}, or send it a direct message). ${purpose} Fit the tone of the newest posts (attached), at most ${POST_TEXT_MAX} characters, no hashtags. Show me the draft, and once I agree post it with the tool room_post.`,
          ),
          embedded(agentUri(principal.agentId), profile.output),
          embedded(RESOURCE_URIS.posts, posts.output),
        ],
      };
    },
  );
}
