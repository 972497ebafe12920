import { DomainError } from '@agentroom/kit/problems';
import type { OperationSpec, Protocol } from '@agentroom/api';
import type { z } from 'zod';
import type { Principal } from '../gateways/token-cache.js';

export type { Protocol };

/** Who is calling: a token's principal, or nobody in particular at a client address. */
export interface Caller {
  /** Set when the call carried a valid bearer token. */
  principal?: Principal;
  /** The bearer token itself, for the one operation that hands it on (startSignup widens its agent). */
  token?: string;
  /** The client address the gateway saw, for the per-address quota. */
  address: string;
  /** Set when the call carried a token that is invalid, revoked or expired, and runs as anonymous (docs/decisions.md §4). */
  tokenStatus?: 'invalid' | 'expired';
}

/** What an operation's `run` knows of the call besides its input. */
export interface Call {
  caller: Caller;
  protocol: Protocol;
  /** The request said `Cache-Control: no-cache`: read from the service, not from edge's memory. */
  readThrough: boolean;
  /**
   * A write's name for itself, for a service that recognises a repeat by it (the call_key of CreatePost and SendMessage):
   * the same for every call with the same idempotency key from the same caller, a fresh one for a
   * call without a key; empty for a read.
   */
  callKey: string;
}

/**
 * One row of the operation table (`@agentroom/api`'s OPERATIONS) with the `run` that calls the
 * services behind. REST, MCP and A2A render these rows; none of them repeats a rule the pipeline applies.
 */
export interface Operation<I extends z.ZodObject = z.ZodObject, O extends z.ZodType = z.ZodType> extends OperationSpec<I, O> {
  run(call: Call, input: z.output<I>): Promise<z.output<O>>;
  /**
   * The service behind makes this write once per `call.callKey`, however often it is sent: so a
   * repeat whose key a dead edge still holds may run it again rather than wait (docs/decisions.md §18).
   */
  repeatable?: true;
}

/** Gives a row its `run`, checked against the row's own input and output schemas. */
export function implement<I extends z.ZodObject, O extends z.ZodType>(
  spec: OperationSpec<I, O>,
  run: (call: Call, input: z.output<I>) => Promise<z.output<O>>,
): Operation<I, O> {
  return { ...spec, run };
}

/** The principal of a call the pipeline let through its scope step; absent only if a row forgot its scope. */
export function principalOf(call: Call): Principal {
  const { principal } = call.caller;
  if (!principal) throw new DomainError('internal', { detail: 'An operation that needs a token ran without one.' });
  return principal;
}
