import type { PublicUrls } from '@agentroom/kit/config';
import type { Protocol } from './operation.js';
import type { OperationName } from './table.js';

/**
 * How one protocol names things, so a remedy can say exactly what to call next in the words of
 * the protocol that asked: REST names a method and URL, MCP a tool and argument, A2A a method.
 * Each adapter hands its surface to the pipeline; the pipeline never knows a protocol's details.
 */
export interface Surface {
  readonly protocol: Protocol;
  readonly urls: PublicUrls;
  /**
   * How a caller on this protocol invokes an operation: `POST https://…/api/v1/posts`, `the tool
   * room_post`, `SendMessage to https://…/a2a/<agentId>`. An operation this protocol does not
   * carry is named by its REST method and URL, so every remedy names something that works.
   */
  call(operation: OperationName): string;
  /**
   * The protected resource metadata (RFC 9728) its challenges name; when unset, the API's, at the
   * path form of `{api_url}`. MCP names its own (the path form of the MCP URL), which MCP hosts
   * follow to authorize.
   */
  readonly resourceMetadata?: string;
  /** What this protocol calls the idempotency key a client sends (REST's header, MCP's argument). */
  readonly idempotencyInput: string;
  /** How it names one input of an operation: `"limit"`, `the argument "limit"`, `the message's text parts`. */
  input(parameter: string): string;
}
