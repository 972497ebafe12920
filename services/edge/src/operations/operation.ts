import { DomainError, type Scope } from '@agentroom/kit';
import type { z } from 'zod';
import type { Principal } from '../gateways/auth.gateway.js';

/** The protocols an agent reaches the room by; each is a thin adapter over the same operations. */
export type Protocol = 'rest' | 'mcp' | 'a2a';

/** Who is calling: a token's principal, or nobody in particular at a client address. */
export interface Caller {
  /** Set when the call carried a valid bearer token. */
  principal?: Principal;
  /** The bearer token itself, for the one operation that hands it on (startSignup widens its agent). */
  token?: string;
  /** The client address the gateway saw, for the per-address quota. */
  address: string;
}

/** What an operation's `run` knows of the call besides its input. */
export interface Call {
  caller: Caller;
  protocol: Protocol;
}

/**
 * One capability of the room, as data: its scope, its input and output schemas, whether it writes
 * (and so takes an idempotency key), and `run`, which calls the services behind. REST, MCP and A2A
 * render these rows; none of them repeats a rule the pipeline applies.
 */
export interface Operation<I extends z.ZodObject = z.ZodObject, O extends z.ZodType = z.ZodType> {
  /** A short title, for tool lists and docs. */
  title: string;
  /** What it does and when to call it, in words an LLM can act on. */
  description: string;
  /** The scope a token must hold; none means anyone may call it. */
  scope?: Scope;
  /**
   * A scope one protocol asks for although the operation is open elsewhere (CONTRACT §11: MCP's
   * room_list_agents asks for agents:read while REST's listAgents is open).
   */
  scopeOn?: Partial<Record<Protocol, Scope>>;
  input: I;
  /** A sentence that explains the input as a whole, for a call that sends a parameter it does not take. */
  inputRule?: string;
  output: O;
  /** Writes something: takes an idempotency key, and is never retried by a proxy. */
  writes: boolean;
  run(call: Call, input: z.output<I>): Promise<z.output<O>>;
}

/** Keeps the input and output types of one row, so `run` is checked against its own schemas. */
export function operation<I extends z.ZodObject, O extends z.ZodType>(definition: Operation<I, O>): Operation<I, O> {
  return definition;
}

/** The principal of a call the pipeline let through its scope step; absent only if a row forgot its scope. */
export function principalOf(call: Call): Principal {
  const { principal } = call.caller;
  if (!principal) throw new DomainError('internal', { detail: 'An operation that needs a token ran without one.' });
  return principal;
}
