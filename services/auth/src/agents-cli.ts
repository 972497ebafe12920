// `npm run agents -- provision …` (or, in the image, `node services/auth/dist/agents-cli.js provision …`):
// approved agents and their tokens for load tests, made through the auth service's own gRPC API
// (ProvisionAgent), in the name of a human who has an account. Each agent is made as an approval makes
// it, logged by auth, and listed on the human's account page as provisioned, where it can be revoked.
// The tokens go to a file only its owner can read (k6 scripts read it), or to stdout with `--out -`.
// `npm run agents -- moderator grant|revoke NAME` and `… moderator list`: the room's moderators
// (SetModerator, ListModerators), humans who act on reports at /moderation/queue.
import { randomBytes } from 'node:crypto';
import { access, constants, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import { grpcTarget } from '@agentroom/kit/config';
import { codePointLength, type Scope, SCOPES } from '@agentroom/kit/domain';
import { clientOptions, fromServiceError, HealthChecker } from '@agentroom/kit/grpc';
import { authProto, type AuthServiceClient } from '@agentroom/proto';
import { z } from 'zod';
import { AGENT_NAME_MAX, PROVISION_REASON_MAX } from './device-flow.js';
import { HUMAN_NAME_MAX } from './humans.js';

const USAGE =
  'npm run agents -- provision --human NAME --scopes SCOPE[,SCOPE…] --out FILE|- [--count N] [--prefix P | --name NAME] [--reason TEXT] [--auth HOST:PORT] [--force] [--concurrency N]' +
  ' | moderator grant|revoke NAME [--auth HOST:PORT] | moderator list [--auth HOST:PORT]';
/** Where auth's gRPC server listens by default (its AUTH_GRPC_ADDR), seen from the same machine. */
const DEFAULT_AUTH = '127.0.0.1:50052';
const COUNT_MAX = 100_000;
const CONCURRENCY_MAX = 64;
/** One agent is a room write and a few store writes: seconds mean the service is in trouble. */
const CALL_DEADLINE_MS = 10_000;
/** A progress line after every this many agents, on runs longer than that. */
const PROGRESS_EVERY = 50;
/** The same words in every "cannot reach auth" line. */
const HOW_TO_REACH =
  'start one with `npm run cluster` and pass --auth with the auth address its ready line prints (or set AUTH_ADDR); in Kubernetes run this inside the auth pod: kubectl exec deploy/<release>-auth -- node services/auth/dist/agents-cli.js provision …';

/** Where a gRPC answer of ours carries its problem (kit's grpc/status.ts): present only when auth itself answered. */
const PROBLEM_TRAILER = 'agentroom-problem-bin';

/** A mistake in the command: one line, exit 2; with the usage when the command line itself is malformed. */
class UsageError extends Error {
  constructor(
    message: string,
    readonly showUsage = true,
  ) {
    super(message);
  }
}
/** Anything else that stops a run: one line, exit 1. */
class RunError extends Error {}

interface ProvisionOptions {
  auth: string;
  human: string;
  /** The agents' names, one per agent. */
  names: string[];
  scopes: Scope[];
  reason: string;
  /** A file path, or `-` for stdout. */
  out: string;
  force: boolean;
  concurrency: number;
}

/** The address to dial: --auth, AUTH_ADDR, auth's own AUTH_GRPC_ADDR (inside its pod), or the default. */
function defaultAuth(env: NodeJS.ProcessEnv): string {
  if (env.AUTH_ADDR) return env.AUTH_ADDR;
  // Inside the auth pod its listen address is set (0.0.0.0:50053 in the chart): dial it on loopback.
  const listen = env.AUTH_GRPC_ADDR;
  if (listen) return listen.replace(/^(?:0\.0\.0\.0|\[::\]|::|\*):/, '127.0.0.1:');
  return DEFAULT_AUTH;
}

function integer(flag: string, value: string | undefined, fallback: number, max: number): number {
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > max)
    throw new UsageError(`--${flag} must be a whole number from 1 to ${max.toLocaleString('en-US')}, not ${JSON.stringify(value)}`);
  return Number(value);
}

function printable(flag: string, value: string, max: number): string {
  const text = value.trim().replace(/\s+/g, ' ');
  if (text === '' || codePointLength(text) > max || /\p{Cc}/u.test(text)) throw new UsageError(`--${flag} must be 1 to ${max} printable characters`);
  return text;
}

const FLAGS = {
  human: { type: 'string' },
  scopes: { type: 'string' },
  out: { type: 'string' },
  count: { type: 'string' },
  prefix: { type: 'string' },
  name: { type: 'string' },
  reason: { type: 'string' },
  auth: { type: 'string' },
  force: { type: 'boolean' },
  concurrency: { type: 'string' },
} as const;

function flagsOf(argv: string[]): ReturnType<typeof parseArgs<{ args: string[]; options: typeof FLAGS; strict: true; allowPositionals: false }>> {
  try {
    return parseArgs({ args: argv, options: FLAGS, strict: true, allowPositionals: false });
  } catch (error) {
    // node:util's own words ("Unknown option '--x'"), up to their first full stop.
    throw new UsageError((error as Error).message.split('. ')[0] ?? 'bad arguments');
  }
}

/** Reads the command line; every mistake is a UsageError naming the flag. */
function parseProvision(argv: string[], env: NodeJS.ProcessEnv): ProvisionOptions {
  const parsed = flagsOf(argv);
  const { values } = parsed;
  for (const flag of ['human', 'scopes', 'out'] as const) {
    if (values[flag] === undefined || values[flag] === '') throw new UsageError(`--${flag} is required`);
  }
  const human = printable('human', values.human ?? '', HUMAN_NAME_MAX);
  const asked = (values.scopes ?? '')
    .split(',')
    .map((scope) => scope.trim())
    .filter((scope) => scope !== '');
  const unknown = asked.filter((scope) => !(SCOPES as readonly string[]).includes(scope));
  if (asked.length === 0 || unknown.length > 0) {
    throw new UsageError(
      `${asked.length === 0 ? '--scopes names no scope' : `unknown scope ${JSON.stringify(unknown[0])}`}; the scopes are ${SCOPES.join(', ')} (comma-separated, at least one)`,
    );
  }
  const scopes = SCOPES.filter((scope) => asked.includes(scope));
  const count = integer('count', values.count, 1, COUNT_MAX);
  let names: string[];
  if (values.name !== undefined) {
    if (values.prefix !== undefined) throw new UsageError('--name and --prefix do not go together: --name makes one agent, --prefix names many');
    if (count !== 1) throw new UsageError('--name makes one agent; for several, use --prefix with --count');
    names = [printable('name', values.name, AGENT_NAME_MAX)];
  } else {
    const prefix = printable('prefix', values.prefix ?? 'load', AGENT_NAME_MAX);
    const width = String(count).length;
    if (codePointLength(prefix) + 1 + width > AGENT_NAME_MAX)
      throw new UsageError(`--prefix is too long: with the number it must fit in ${AGENT_NAME_MAX} characters`);
    names = Array.from({ length: count }, (_, i) => `${prefix}-${String(i + 1).padStart(width, '0')}`);
  }
  const reason = printable('reason', values.reason ?? 'load test', PROVISION_REASON_MAX);
  const auth = values.auth ?? defaultAuth(env);
  if (!grpcTarget.safeParse(auth).success)
    throw new UsageError(`--auth must be HOST:PORT (or a gRPC target such as dns:///host:port), not ${JSON.stringify(auth)}`);
  return {
    auth,
    human,
    names,
    scopes,
    reason,
    out: values.out ?? '-',
    force: values.force ?? false,
    concurrency: integer('concurrency', values.concurrency, 8, CONCURRENCY_MAX),
  };
}

/** What a provisioned agent looks like in the output file. */
interface AgentEntry {
  id: string;
  name: string;
  token: string;
  scopes: Scope[];
}

// The answer comes from another process: checked before it is written anywhere.
const provisionAnswer = z.object({
  agentId: z.string().min(1),
  agentName: z.string().min(1),
  accessToken: z.string().startsWith('agt_'),
  scopes: z.array(z.enum(SCOPES)).min(1),
  human: z.string().min(1),
});

/** Refuses before anything is provisioned what would fail at the end: an existing file, a folder we cannot write. */
async function checkOut(options: ProvisionOptions): Promise<void> {
  if (options.out === '-') return;
  const path = resolve(options.out);
  const existing = await stat(path).catch(() => undefined);
  if (existing?.isDirectory()) throw new UsageError(`--out ${options.out} is a directory; name a file`, false);
  if (existing && !options.force) throw new UsageError(`${options.out} exists; pass --force to replace it, or choose another --out`, false);
  try {
    await access(dirname(path), constants.W_OK);
  } catch {
    throw new UsageError(`cannot write to ${dirname(path)}: choose another --out (inside a pod, /tmp, or --out - for stdout)`, false);
  }
}

/**
 * Writes the tokens readable by their owner only (0600). A new file is created exclusively, so a
 * file that appeared meanwhile is not overwritten; with --force a fresh file replaces the old one
 * whole, so the old one's permissions do not carry over.
 */
async function writeTokens(options: ProvisionOptions, body: string): Promise<void> {
  if (options.out === '-') {
    await new Promise<void>((done, fail) => process.stdout.write(body, (error) => (error ? fail(error) : done())));
    return;
  }
  const path = resolve(options.out);
  if (!options.force) {
    await writeFile(path, body, { mode: 0o600, flag: 'wx' });
    return;
  }
  const scratch = resolve(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    await writeFile(scratch, body, { mode: 0o600, flag: 'wx' });
    await rename(scratch, path);
  } catch (error) {
    await rm(scratch, { force: true });
    throw error;
  }
}

/** A failed call as the one line the operator reads, and whether it is their command's fault (exit 2). */
function explain(error: unknown, options: { auth: string }, what = 'ProvisionAgent'): UsageError | RunError {
  const code = error instanceof Error && 'code' in error ? (error as grpc.ServiceError).code : undefined;
  if (code === grpc.status.PERMISSION_DENIED) return new RunError(`auth at ${options.auth} refused: ${(error as grpc.ServiceError).details}`);
  if (code === grpc.status.UNIMPLEMENTED)
    return new RunError(`auth at ${options.auth} does not offer ${what}: it runs an older version of Agent Room; upgrade it`);
  if (code === grpc.status.DEADLINE_EXCEEDED)
    return new RunError(`auth at ${options.auth} did not answer within ${CALL_DEADLINE_MS / 1000} s; check its logs and its storage, then run this again`);
  // A problem auth sent (its trailer) is auth's answer; without one, the call never got there.
  const answered = code !== undefined && ((error as grpc.ServiceError).metadata?.get(PROBLEM_TRAILER).length ?? 0) > 0;
  if (code === grpc.status.UNAVAILABLE && !answered) return new RunError(`auth at ${options.auth} is unreachable or not ready: ${HOW_TO_REACH}`);
  const problem = fromServiceError(error);
  if (problem.slug === 'unavailable') {
    return new RunError(
      what === 'ProvisionAgent'
        ? `auth at ${options.auth} could not make the agent: ${problem.detail ?? problem.title} (its storage or the room service is down: see auth's log), then run this again`
        : `auth at ${options.auth} could not do it: ${problem.detail ?? problem.title} (its storage or the record service is down: see auth's log), then run this again`,
    );
  }
  if (problem.slug === 'not-found' && problem.fields.parameter === 'human_name') {
    return new UsageError(
      `${problem.detail ?? 'no such human'} Register that human once there (in a browser, or with curl as load-tests/README.md shows under "Tokens"), then run this again`,
      false,
    );
  }
  if (problem.slug === 'invalid-request' || problem.slug === 'invalid-scope') return new UsageError(problem.detail ?? problem.title, false);
  return new RunError(`auth at ${options.auth} failed: ${problem.detail ?? problem.title}`);
}

/** One agent, and the human's display name as auth knows it (the operator may have typed it in another case). */
function provisionOne(client: AuthServiceClient, options: ProvisionOptions, name: string): Promise<{ agent: AgentEntry; human: string }> {
  return new Promise((done, fail) => {
    client.provisionAgent(
      { humanName: options.human, agentName: name, scopes: options.scopes, reason: options.reason },
      { deadline: Date.now() + CALL_DEADLINE_MS },
      (error, response) => {
        if (error) return fail(error);
        const answer = provisionAnswer.safeParse(response);
        if (!answer.success) return fail(new RunError(`auth at ${options.auth} answered something that is not a provisioned agent`));
        const { agentId, agentName, accessToken, scopes, human } = answer.data;
        return done({ agent: { id: agentId, name: agentName, token: accessToken, scopes }, human });
      },
    );
  });
}

function rate(done: number, since: number): string {
  const seconds = (performance.now() - since) / 1000;
  return `${Math.round(done / Math.max(seconds, 0.001)).toLocaleString('en-US')} agents/s`;
}

/** Provisions every agent asked for, `concurrency` calls at a time; stops issuing new ones at the first failure. */
async function provision(options: ProvisionOptions): Promise<void> {
  await checkOut(options);
  const health = new HealthChecker(options.auth);
  const status = await health.check('', 5_000);
  health.close();
  if (status === 'UNREACHABLE') throw new RunError(`no auth service answers at ${options.auth} (gRPC): ${HOW_TO_REACH}`);
  if (status !== 'SERVING')
    throw new RunError(
      `auth at ${options.auth} is not serving (${status.toLowerCase()}: it is starting, shutting down, or its storage is down); try again when it is ready`,
    );

  const AuthService = authProto().AuthService;
  const client = new AuthService(options.auth, grpc.credentials.createInsecure(), clientOptions(AuthService.service));
  const total = options.names.length;
  const agents: (AgentEntry | undefined)[] = new Array<AgentEntry | undefined>(total);
  const started = performance.now();
  let next = 0;
  let done = 0;
  let failure: unknown;
  let human = options.human;
  const worker = async (): Promise<void> => {
    while (failure === undefined && next < total) {
      const index = next;
      next += 1;
      try {
        const made = await provisionOne(client, options, options.names[index] as string);
        agents[index] = made.agent;
        human = made.human;
      } catch (error) {
        failure ??= error;
        return;
      }
      done += 1;
      if (total > PROGRESS_EVERY && done % PROGRESS_EVERY === 0 && done < total)
        process.stderr.write(`agents: ${done} of ${total} provisioned (${rate(done, started)})\n`);
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(options.concurrency, total) }, worker));
  } finally {
    client.close();
  }

  const made = agents.filter((agent): agent is AgentEntry => agent !== undefined);
  const stopped = failure === undefined ? undefined : explain(failure, options);
  if (made.length === 0) throw stopped ?? new RunError('nothing was provisioned');
  // What was made is written even when the run stopped half-way: those tokens work, and are told only once.
  const document = { auth: options.auth, human, createdAt: new Date().toISOString(), agents: made };
  try {
    await writeTokens(options, `${JSON.stringify(document, null, 2)}\n`);
  } catch (error) {
    // The tokens are told once and never printed: those agents can only be revoked now.
    throw new RunError(
      `provisioned ${made.length} agent(s) but could not write their tokens to ${options.out} (${(error as Error).message}); revoke them on ${JSON.stringify(human)}'s account page and run this again`,
    );
  }
  const where = options.out === '-' ? 'stdout' : `${options.out} (mode 0600: it holds secrets)`;
  if (stopped) {
    throw new RunError(`provisioned ${made.length} of ${total} agents, written to ${where}, then stopped: ${stopped.message}`);
  }
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  process.stderr.write(
    `agents: provisioned ${total} agent(s) for ${JSON.stringify(human)} in ${seconds} s (${rate(total, started)}), scopes ${options.scopes.join(',')}; tokens in ${where}. They are listed on that human's account page, where they can be revoked.\n`,
  );
}

/** Reads `moderator grant|revoke NAME [--auth …]` or `moderator list [--auth …]`. */
function parseModerator(argv: string[], env: NodeJS.ProcessEnv): { action: 'grant' | 'revoke' | 'list'; name: string; auth: string } {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: { auth: { type: 'string' } }, strict: true, allowPositionals: true });
  } catch (error) {
    throw new UsageError((error as Error).message.split('. ')[0] ?? 'bad arguments');
  }
  const [action, ...names] = parsed.positionals;
  if (action !== 'grant' && action !== 'revoke' && action !== 'list') throw new UsageError('moderator takes grant NAME, revoke NAME or list');
  if (action === 'list' && names.length > 0) throw new UsageError('moderator list takes no name');
  if (action !== 'list' && names.length !== 1) throw new UsageError(`moderator ${action} takes one human's name (quote a name with spaces)`);
  const auth = parsed.values.auth ?? defaultAuth(env);
  if (!grpcTarget.safeParse(auth).success)
    throw new UsageError(`--auth must be HOST:PORT (or a gRPC target such as dns:///host:port), not ${JSON.stringify(auth)}`);
  return { action, name: action === 'list' ? '' : printable('name', names[0] ?? '', HUMAN_NAME_MAX), auth };
}

const moderatorAnswer = z.object({ humanId: z.string().min(1), humanName: z.string().min(1), moderator: z.boolean() });

/** Grants, takes or lists the moderator role through auth's loopback-only SetModerator / ListModerators. */
async function moderator(options: ReturnType<typeof parseModerator>): Promise<void> {
  const AuthService = authProto().AuthService;
  const client = new AuthService(options.auth, grpc.credentials.createInsecure(), clientOptions(AuthService.service));
  const deadline = { deadline: Date.now() + CALL_DEADLINE_MS };
  try {
    if (options.action === 'list') {
      const answer = await new Promise<unknown>((done, fail) =>
        client.listModerators({}, deadline, (error, response) => (error ? fail(error) : done(response))),
      );
      const moderators = z.object({ moderators: z.array(moderatorAnswer) }).parse(answer).moderators;
      for (const each of moderators) process.stdout.write(`${each.humanName}\n`);
      process.stderr.write(`agents: ${moderators.length} moderator(s)\n`);
      return;
    }
    const answer = await new Promise<unknown>((done, fail) =>
      client.setModerator({ humanName: options.name, moderator: options.action === 'grant' }, deadline, (error, response) =>
        error ? fail(error) : done(response),
      ),
    );
    const { humanName } = moderatorAnswer.parse(answer);
    process.stderr.write(
      options.action === 'grant'
        ? `agents: ${JSON.stringify(humanName)} is a moderator: their next page shows the moderation queue\n`
        : `agents: ${JSON.stringify(humanName)} is no longer a moderator\n`,
    );
  } catch (error) {
    if (error instanceof z.ZodError) throw new RunError(`auth at ${options.auth} answered something that is not a moderator`);
    const problem = explain(error, options, options.action === 'list' ? 'ListModerators' : 'SetModerator');
    // A name nobody has: the operator's mistake, said in their words.
    if (problem instanceof UsageError)
      throw new UsageError(
        fromServiceError(error).slug === 'not-found' ? `no human is named ${JSON.stringify(options.name)}: they sign up at /signin first` : problem.message,
        false,
      );
    throw problem;
  } finally {
    client.close();
  }
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(`usage: ${USAGE}\n`);
    return 0;
  }
  try {
    if (command === undefined) throw new UsageError('no command given; the commands are provision and moderator');
    if (command !== 'provision' && command !== 'moderator')
      throw new UsageError(`unknown command ${JSON.stringify(command)}; the commands are provision and moderator`);
    if (rest.includes('--help') || rest.includes('-h')) {
      process.stdout.write(`usage: ${USAGE}\n`);
      return 0;
    }
    if (command === 'moderator') await moderator(parseModerator(rest, process.env));
    else await provision(parseProvision(rest, process.env));
    return 0;
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`agents: ${error.message}${error.showUsage ? `; usage: ${USAGE}` : ''}\n`);
      return 2;
    }
    if (error instanceof RunError) {
      process.stderr.write(`agents: ${error.message}\n`);
      return 1;
    }
    // A bug, not a situation: keep the stack.
    throw error;
  }
}

process.exitCode = await main(process.argv.slice(2));
