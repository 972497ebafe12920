import { createHash, randomUUID } from 'node:crypto';
import { isWellFormedToken, plainTextFault, PLAIN_TEXT_EXPECTED, type Scope } from '@agentroom/kit/domain';
import { fromServiceError } from '@agentroom/kit/grpc';
import { IDEMPOTENCY_KEY, idempotencyInFlight, idempotencyKeyInvalid, idempotencyMismatch, rateLimited, unknownQuota } from '@agentroom/kit/http';
import type { Logger } from '@agentroom/kit/log';
import { operationDuration, quotaRejections } from '@agentroom/kit/metrics';
import { DomainError, unavailable } from '@agentroom/kit/problems';
import { type BeginResult, type CountedClaim, type IdempotencyStore, keyBesideQuota, type QuotaState, type QuotaStore } from '@agentroom/kit/store';
import { inSpan, type Span, SpanStatusCode } from '@agentroom/kit/telemetry';
import { fieldRuleOf, scopeFor } from '@agentroom/api';
import type { z } from 'zod';
import type { Principal, Suspension } from '../gateways/token-cache.js';
import { type Problem, renderProblem } from './problem.js';
import { onlyTakes } from './remedies.js';
import type { Caller, Operation } from './operation.js';
import type { Surface } from './surface.js';
import type { OperationName, Operations } from './table.js';

/** The credentials a request arrives with, whatever the protocol. */
export interface Credentials {
  /** The `Authorization` header as sent, if any. */
  authorization?: string | undefined;
  /** The client address the gateway saw. */
  address: string;
  /** The request's path: a token bound to a resource (RFC 8707) works only at that resource's path and below. */
  path?: string | undefined;
}

/** Whether a request at `path` is within the resource a token is bound to ('' binds it to nothing). */
export function withinResource(resource: string, path: string | undefined): boolean {
  if (resource === '') return true;
  let bound: string;
  try {
    bound = new URL(resource).pathname.replace(/\/+$/, '');
  } catch {
    return false;
  }
  return path !== undefined && (path === bound || path.startsWith(`${bound}/`));
}

/**
 * One call admitted: who it is (steps 1 and 3 of the pipeline ran once, for the whole request),
 * the quota after counting it, and what the later steps must refuse it for.
 */
export interface Admission {
  caller: Caller;
  /** The quota bucket it counted against: `tok:<tokenId>`, or `addr:<address>` without a valid token. */
  subject: string;
  quota: QuotaState;
  /**
   * A token that was sent but does not hold. Refused by every operation that needs a scope; one
   * that needs none (reading the room, feedback) runs as anonymous if the token is merely invalid,
   * revoked or expired (docs/decisions.md §4).
   */
  tokenRefusal?: DomainError;
  /** The quota could not be counted (storage down): refused at the quota step. */
  quotaFailure?: DomainError;
}

export type Outcome<T> = { ok: true; output: T; replayed: boolean } | { ok: false; problem: Problem };

export interface InvokeOptions {
  /** How the calling protocol names things, for the remedy of any failure. */
  surface: Surface;
  /** REST's `Idempotency-Key`, MCP's `idempotency_key`, A2A's message id: one key space (docs/decisions.md §6). */
  idempotencyKey?: string | undefined;
  /** The HTTP request carried `Cache-Control: no-cache`: reads skip edge's own memory (the first page). */
  readThrough?: boolean | undefined;
}

export interface CoreOptions {
  operations: Operations;
  /** Who a token speaks for: the auth service's answer, or its token-invalid / token-expired problem. */
  authenticate(token: string): Promise<Principal>;
  quota: QuotaStore;
  idempotency: IdempotencyStore;
  quotaPerToken: number;
  quotaPerAddress: number;
  log: Logger;
  /**
   * Counts a call and claims its idempotency key in one step where the stores can (Redis: one
   * script, so one round trip); `admitAndInvoke` otherwise counts, then claims.
   */
  consumeAndBegin?: (subject: string, limit: number, key: string, fingerprint: string) => Promise<CountedClaim>;
}

/** Who is calling, before anything is counted: step 1 of the pipeline. */
type Identified = Pick<Admission, 'caller' | 'subject' | 'tokenRefusal'> & { limit: number };

/** An operation's input once checked (steps 4 and 5), and the idempotency key it claims, if any. */
interface Prepared {
  input: Parameters<Operation['run']>[1];
  /** The key as the idempotency store holds it, beside the caller's quota counter. */
  storeKey?: string;
  fingerprint: string;
}

const BEARER = /^Bearer ([^\s]+)$/i;

/** A token refusal that leaves the call anonymous where no scope is needed: the token is bad, not the call. */
function refusedAsAnonymous(refusal: DomainError): 'invalid' | 'expired' | undefined {
  if (refusal.slug === 'token-invalid') return 'invalid';
  if (refusal.slug === 'token-expired') return 'expired';
  return undefined;
}

type OutputOf<N extends OperationName> = z.output<Operations[N]['output']>;

/** JSON with keys in a fixed order, so the same input fingerprints alike whichever protocol carried it. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * How old a running claim must be before a repeat of a {@link Operation.repeatable} write runs it
 * again: older than any call of it can run (one call to the service, within GRPC_DEADLINE_MS's 2 s),
 * so its edge died with it, and the client's retry need not wait out the claim's minute. Should the
 * first still run, the service answers both the one result (the call key).
 */
export const RUNNING_TAKEOVER_MS = 2_500;

/** A write's call key from its idempotency key as the store holds it, which is already the caller's and the operation's own. */
function callKeyOf(storeKey: string): string {
  return sha256(storeKey);
}

function mayTakeOver(op: Operation, since: number | undefined): boolean {
  return op.repeatable === true && since !== undefined && Date.now() - since >= RUNNING_TAKEOVER_MS;
}

function sha256(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/**
 * The one pipeline every protocol calls. Per request, `admit` authenticates the bearer token once
 * and counts the call against one daily bucket (per token whichever protocol it uses, per address
 * without one). Per operation, `invoke` then refuses a bad token, checks the scope, refuses a spent
 * quota, validates the input, applies idempotency, runs the operation, and turns any failure into
 * a problem worded for the protocol that asked. No adapter repeats a step.
 */
export class Core {
  constructor(private readonly options: CoreOptions) {}

  get operations(): Operations {
    return this.options.operations;
  }

  /** Steps 1 and 3 for one request: who is calling, and one count against their quota. Never throws. */
  async admit(credentials: Credentials): Promise<Admission> {
    return this.count(await this.identify(credentials));
  }

  /**
   * `admit`, then `invoke` of one operation, for a request that carries exactly that operation (a
   * REST binding with a body, rest/routes.ts): the same steps in the same order, but the quota
   * count and the idempotency claim go to the store together, one Redis round trip instead of
   * two. The key is claimed only when the call passes every step before the claim: its token and
   * scope, its input and key (checked first, without a store), and its quota (the store counts
   * first, and claims only within the limit).
   */
  async admitAndInvoke<N extends OperationName>(
    credentials: Credentials,
    name: N,
    input: unknown,
    options: InvokeOptions,
  ): Promise<{ admission: Admission; outcome: Outcome<OutputOf<N>> }> {
    return inSpan(name, operationSpan(name, options), async (span) => {
      const answer = await this.admitAndRun(credentials, name, input, options);
      endOperationSpan(span, answer.outcome);
      return answer;
    });
  }

  private async admitAndRun<N extends OperationName>(
    credentials: Credentials,
    name: N,
    input: unknown,
    options: InvokeOptions,
  ): Promise<{ admission: Admission; outcome: Outcome<OutputOf<N>> }> {
    const identified = await this.identify(credentials);
    const started = process.hrtime.bigint();
    const op = this.options.operations[name] as unknown as Operation;
    const { consumeAndBegin } = this.options;
    let prepared: Prepared | undefined;
    if (consumeAndBegin !== undefined) {
      try {
        this.authorizeCaller(identified, scopeFor(op, options.surface.protocol));
        // A suspended agent's write claims no key: the retry after a resume may use it.
        const suspension = identified.caller.principal?.suspension;
        if (refusesWhileSuspended(op, suspension)) throw suspendedProblem(suspension);
        const checked = this.prepare(op, identified.subject, name, input, options);
        if (!(checked instanceof DomainError) && checked.storeKey !== undefined) prepared = checked;
      } catch {
        // Refused before the claim: counted alone below, and refused again, in order, by `steps`.
      }
    }
    let admission: Admission;
    let begun: BeginResult | undefined;
    if (consumeAndBegin === undefined || prepared?.storeKey === undefined) {
      admission = await this.count(identified);
    } else {
      try {
        const { storeKey, fingerprint } = prepared;
        const counted = await inSpan('quota and idempotency', { attributes: { 'agentroom.quota.subject': subjectKind(identified.subject) } }, () =>
          consumeAndBegin(identified.subject, identified.limit, storeKey, fingerprint),
        );
        admission = this.admitted(identified, counted.quota);
        begun = counted.begun;
      } catch (error) {
        admission = this.countFailed(identified, error);
      }
    }
    const outcome = await this.steps(admission, name, input, options, begun === undefined || prepared === undefined ? undefined : { ...prepared, begun });
    this.observe(name, options, outcome, started);
    return { admission, outcome };
  }

  /** Step 1: who is calling, and which quota bucket the call counts against. Never throws: a bad token is kept as the refusal. */
  private async identify(credentials: Credentials): Promise<Identified> {
    if (credentials.authorization === undefined) return this.identifyUntraced(credentials);
    // The token's check: auth's answer, or edge's token cache when it holds the token (no auth span then).
    return inSpan('authenticate', {}, () => this.identifyUntraced(credentials));
  }

  private async identifyUntraced(credentials: Credentials): Promise<Identified> {
    const caller: Caller = { address: credentials.address };
    let tokenRefusal: DomainError | undefined;
    if (credentials.authorization !== undefined) {
      const token = BEARER.exec(credentials.authorization)?.[1];
      // A mistyped token fails its checksum here, before any store is asked.
      if (token === undefined || !isWellFormedToken(token)) {
        tokenRefusal = new DomainError('token-invalid', { detail: 'The Authorization header does not hold a well-formed agt_ bearer token.' });
      } else {
        try {
          const principal = await this.options.authenticate(token);
          if (withinResource(principal.resource, credentials.path)) {
            caller.principal = principal;
            caller.token = token;
          } else {
            // RFC 8707: a token issued for one resource is refused by every other.
            tokenRefusal = new DomainError('token-invalid', { detail: `This token was issued for ${principal.resource} and works only there.` });
          }
        } catch (error) {
          tokenRefusal = this.domainError(error);
        }
      }
      const status = tokenRefusal && refusedAsAnonymous(tokenRefusal);
      if (status) caller.tokenStatus = status;
    }
    const { principal } = caller;
    const subject = principal ? `tok:${principal.tokenId}` : `addr:${caller.address}`;
    const limit = principal ? this.options.quotaPerToken : this.options.quotaPerAddress;
    return { caller, subject, limit, ...(tokenRefusal ? { tokenRefusal } : {}) };
  }

  /** Step 3: one count against the caller's quota. Never throws. */
  private async count(identified: Identified): Promise<Admission> {
    try {
      const quota = await inSpan('quota', { attributes: { 'agentroom.quota.subject': subjectKind(identified.subject) } }, () =>
        this.options.quota.consume(identified.subject, identified.limit),
      );
      return this.admitted(identified, quota);
    } catch (error) {
      return this.countFailed(identified, error);
    }
  }

  private admitted({ caller, subject, tokenRefusal }: Identified, quota: QuotaState): Admission {
    return { caller, subject, quota, ...(tokenRefusal ? { tokenRefusal } : {}) };
  }

  private countFailed({ caller, subject, limit, tokenRefusal }: Identified, error: unknown): Admission {
    this.options.log.error({ err: error }, 'quota store failed');
    // The count is unknown; say so with a full allowance rather than tell the client to stop for a day.
    return { caller, subject, quota: unknownQuota(limit), quotaFailure: unavailable(), ...(tokenRefusal ? { tokenRefusal } : {}) };
  }

  /**
   * Steps 2 to 4 without an operation, for what is not a row of the table (live feeds, pages, the
   * MCP handshake): a bad token, a missing scope, a spent quota. Throws the DomainError.
   */
  authorize(admission: Admission, scope?: Scope, options: { servedWhenStorageFails?: boolean } = {}): Principal | undefined {
    const principal = this.authorizeCaller(admission, scope);
    if (admission.quotaFailure && options.servedWhenStorageFails !== true) throw admission.quotaFailure;
    if (!admission.quota.allowed) {
      quotaRejections.inc({ service: 'edge' });
      throw rateLimited(admission.quota);
    }
    return principal;
  }

  /** Step 2 of `authorize`, without the quota: a bad token, a missing scope. Throws the DomainError. */
  private authorizeCaller(who: Pick<Admission, 'caller' | 'tokenRefusal'>, scope?: Scope): Principal | undefined {
    // A bad token fails what needs a scope; what needs none is served as to anyone (counted per address).
    if (who.tokenRefusal && (scope !== undefined || !refusedAsAnonymous(who.tokenRefusal))) throw who.tokenRefusal;
    const { principal } = who.caller;
    if (scope !== undefined) {
      if (!principal) {
        throw new DomainError('no-token', { detail: `This operation needs a bearer token with the scope ${scope}.`, fields: { required_scope: scope } });
      }
      if (!principal.scopes.includes(scope)) {
        throw new DomainError('scope-required', {
          detail: `The token holds ${principal.scopes.join(', ') || 'no scopes'}; this operation needs ${scope}.`,
          fields: { required_scope: scope, held_scopes: principal.scopes },
        });
      }
    }
    return principal;
  }

  /** Runs one operation for an admitted call, on behalf of `options.surface`'s protocol. */
  async invoke<N extends OperationName>(admission: Admission, name: N, input: unknown, options: InvokeOptions): Promise<Outcome<OutputOf<N>>> {
    return inSpan(name, operationSpan(name, options), async (span) => {
      const started = process.hrtime.bigint();
      const outcome = await this.steps(admission, name, input, options);
      this.observe(name, options, outcome, started);
      endOperationSpan(span, outcome);
      return outcome;
    });
  }

  private observe(name: OperationName, options: InvokeOptions, outcome: Outcome<unknown>, started: bigint): void {
    const label = outcome.ok ? (outcome.replayed ? 'replayed' : 'ok') : outcome.problem.error.slug;
    operationDuration.observe({ operation: name, protocol: options.surface.protocol, outcome: label }, Number(process.hrtime.bigint() - started) / 1e9);
  }

  /** A failure as the protocol of `surface` answers it. */
  problem(error: unknown, surface: Surface, operation?: OperationName): Problem {
    return renderProblem(this.domainError(error), surface, operation);
  }

  /**
   * Steps 2 to 6 for an admitted call. `claimed` is the input and key already checked, and what
   * the store found claiming the key, when `admitAndInvoke` claimed it with the count.
   */
  private async steps<N extends OperationName>(
    admission: Admission,
    name: N,
    raw: unknown,
    options: InvokeOptions,
    claimed?: Prepared & { begun: BeginResult },
  ): Promise<Outcome<OutputOf<N>>> {
    // One row, whichever it is: the table's rows differ in their types, not in how they run.
    const op = this.options.operations[name] as unknown as Operation;
    const { surface } = options;
    const fail = (error: unknown): Outcome<OutputOf<N>> => ({ ok: false, problem: this.problem(error, surface, name) });
    try {
      // Health reports a storage failure in its own answer (503 degraded, storage down) rather than be refused by it.
      this.authorize(admission, scopeFor(op, surface.protocol), { servedWhenStorageFails: op.servedWhenStorageFails === true });
    } catch (error) {
      return fail(error);
    }
    // A suspended agent reads as before; none of its writes runs, whatever protocol carries it.
    const suspension = admission.caller.principal?.suspension;
    if (refusesWhileSuspended(op, suspension)) return fail(suspendedProblem(suspension));
    const prepared = claimed ?? this.prepare(op, admission.subject, name, raw, options);
    if (prepared instanceof DomainError) return fail(prepared);
    const { input, storeKey, fingerprint } = prepared;
    const call = {
      caller: admission.caller,
      protocol: surface.protocol,
      readThrough: options.readThrough === true,
      callKey: op.writes ? (storeKey === undefined ? randomUUID() : callKeyOf(storeKey)) : '',
    };

    if (storeKey !== undefined) {
      let begun = claimed?.begun;
      if (begun === undefined) {
        try {
          begun = await inSpan('idempotency', {}, () => this.options.idempotency.begin(storeKey, fingerprint));
        } catch (error) {
          return fail(error);
        }
      }
      if (begun.outcome === 'mismatch') return fail(idempotencyMismatch());
      if (begun.outcome === 'running' && !mayTakeOver(op, begun.since)) return fail(idempotencyInFlight());
      if (begun.outcome === 'replay') return { ok: true, output: begun.result as OutputOf<N>, replayed: true };
    }

    try {
      const output = (await op.run(call, input)) as OutputOf<N>;
      if (storeKey !== undefined) {
        // Kept before answering, so a retry that arrives at once replays rather than waits.
        await this.options.idempotency
          .complete(storeKey, fingerprint, output)
          .catch((error: unknown) => this.options.log.error({ err: error, operation: name }, 'idempotency record not saved'));
      }
      return { ok: true, output, replayed: false };
    } catch (error) {
      // Nothing was written by a call that failed, so its key is free for the retry.
      if (storeKey !== undefined)
        await this.options.idempotency
          .abandon(storeKey)
          .catch((failure: unknown) => this.options.log.error({ err: failure, operation: name }, 'idempotency key not released'));
      return fail(error);
    }
  }

  /**
   * Steps 4 and 5 before any store is asked: the input as the operation takes it (or the problem
   * with it), and for a write with an idempotency key, the key as the store holds it (one key space
   * per caller and operation, whichever protocol carried it) and the input's fingerprint.
   */
  private prepare(op: Operation, subject: string, name: OperationName, raw: unknown, options: InvokeOptions): Prepared | DomainError {
    const parsed = op.input.safeParse(raw ?? {});
    if (!parsed.success) return invalidInput(op, parsed.error);
    const input = parsed.data;
    const textFault = freeTextFault(op, input as Record<string, unknown>);
    if (textFault) return textFault;
    const key = op.writes ? options.idempotencyKey : undefined;
    if (key === undefined) return { input, fingerprint: '' };
    if (!IDEMPOTENCY_KEY.test(key)) return idempotencyKeyInvalid(options.surface.idempotencyInput);
    // Beside the caller's quota counter, so the two can be written in one step (`admitAndInvoke`).
    return { input, storeKey: keyBesideQuota(subject, `op:${name}:${sha256(key)}`), fingerprint: sha256(canonicalJson(input)) };
  }

  /**
   * What a call of `name` with `raw` and `idempotencyKey` by `subject` claims in the idempotency
   * store (its key and fingerprint there), and the call key its write carries to the service: for a
   * test that plays an edge which claimed a key and died.
   */
  claimOf(subject: string, name: OperationName, raw: unknown, options: InvokeOptions): { storeKey: string; fingerprint: string; callKey: string } | undefined {
    const prepared = this.prepare(this.options.operations[name] as unknown as Operation, subject, name, raw, options);
    if (prepared instanceof DomainError || prepared.storeKey === undefined) return undefined;
    return { storeKey: prepared.storeKey, fingerprint: prepared.fingerprint, callKey: callKeyOf(prepared.storeKey) };
  }

  /** Any failure as a domain error; anything unexpected is logged whole and answered as `internal`. */
  private domainError(error: unknown): DomainError {
    const domain = fromServiceError(error);
    if (domain.slug === 'internal') this.options.log.error({ err: error }, 'operation failed');
    return domain;
  }
}

/** The span of one operation of the core: named after it (`createPost`), with the protocol that carried it. */
function operationSpan(name: OperationName, options: InvokeOptions): { attributes: Record<string, string> } {
  return { attributes: { 'agentroom.operation': name, 'agentroom.protocol': options.surface.protocol } };
}

/** How the operation ended, as the metric's `outcome` label says it; a failure's slug is its `error.type` too, a server's fault its status. */
function endOperationSpan(span: Span, outcome: Outcome<unknown>): void {
  if (outcome.ok) {
    span.setAttribute('agentroom.outcome', outcome.replayed ? 'replayed' : 'ok');
    return;
  }
  const { slug } = outcome.problem.error;
  span.setAttributes({ 'agentroom.outcome': slug, 'error.type': slug });
  if (outcome.problem.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR, message: slug });
}

/** Which kind of bucket a call counts against (`token` or `address`), never the token id or the address itself. */
function subjectKind(subject: string): string {
  return subject.startsWith('tok:') ? 'token' : 'address';
}

/** Whether a suspended caller's call of `op` is refused: a write, unless the row allows it (docs/decisions.md §43). */
function refusesWhileSuspended(op: Operation, suspension: Suspension | undefined): suspension is Suspension {
  return op.writes && suspension !== undefined && op.whileSuspended !== true;
}

/** What a suspended agent's write answers: who suspended it, why, and until when. */
function suspendedProblem(suspension: Suspension): DomainError {
  const who = suspension.by === 'moderator' ? "the room's moderators" : 'its human';
  return new DomainError('agent-suspended', {
    detail: `This agent is suspended by ${who}${suspension.until === undefined ? '' : ` until ${suspension.until}`}: ${suspension.reason}`,
    fields: { reason: suspension.reason, by: suspension.by, ...(suspension.until === undefined ? {} : { until: suspension.until }) },
  });
}

/** Each operation's fields with the plain-text rule, in the order of its input: read off its schema once. */
const plainTextFields = new WeakMap<Operation, string[]>();

/** The first free-text input (a field with the plain-text rule) holding a control character or a lone surrogate, as the problem that names it. */
function freeTextFault(op: Operation, input: Record<string, unknown>): DomainError | undefined {
  let fields = plainTextFields.get(op);
  if (fields === undefined) {
    const shape = op.input.shape as Record<string, z.ZodType>;
    fields = Object.keys(shape).filter((parameter) => fieldRuleOf(shape[parameter])?.plainText === true);
    plainTextFields.set(op, fields);
  }
  for (const parameter of fields) {
    const value = input[parameter];
    if (typeof value !== 'string') continue;
    const fault = plainTextFault(value);
    if (fault !== undefined)
      return new DomainError('invalid-request', { detail: `${parameter} ${fault}.`, fields: { parameter, expected: PLAIN_TEXT_EXPECTED } });
  }
  return undefined;
}

/** The first thing wrong with an input, as the problem that names it and says what is valid. */
function invalidInput(op: Operation, error: z.ZodError): DomainError {
  const issue = error.issues[0];
  const shape = op.input.shape as Record<string, z.ZodType>;
  if (issue?.code === 'unrecognized_keys') {
    const rule = op.inputRule === undefined ? '' : `; ${op.inputRule}`;
    return new DomainError('invalid-request', {
      detail: `This operation takes only ${Object.keys(shape).join(', ') || 'no parameters'}, not ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}.`,
      fields: { parameter: issue.keys[0] ?? '', expected: `${onlyTakes(Object.keys(shape))}${rule}` },
    });
  }
  // A body that is not an object at all (a JSON array) is named itself: not the first field, which
  // may be a path's parameter the request got right.
  if (issue?.code === 'invalid_type' && issue.path.length === 0) {
    return new DomainError('invalid-request', {
      detail: 'The body is not a JSON object; this operation takes its input as one.',
      fields: { parameter: 'body', expected: 'a JSON object' },
    });
  }
  const parameter = typeof issue?.path[0] === 'string' ? issue.path[0] : (Object.keys(shape)[0] ?? 'body');
  // The field's own problem when its schema names one: a bad cursor, a malformed id that names nothing.
  const own = fieldRuleOf(shape[parameter])?.invalid;
  if (own !== undefined) return new DomainError(own.slug, { detail: own.detail, fields: { parameter, ...own.fields } });
  const expected = shape[parameter]?.description ?? issue?.message ?? 'valid';
  return new DomainError('invalid-request', { detail: `${parameter}: ${issue?.message ?? 'invalid'}.`, fields: { parameter, expected } });
}
