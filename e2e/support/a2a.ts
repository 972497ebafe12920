import type { Message } from '@a2a-js/sdk';
import { type Client, ClientFactory } from '@a2a-js/sdk/client';

/** An A2A agent on the SDK's own client: reads the card at `url` (a trailing slash keeps the path), sends with its token. */
export async function a2aClient(url: string): Promise<Client> {
  return new ClientFactory().createFromUrl(url.endsWith('/') ? url : `${url}/`);
}

let sent = 0;

/** A user message with text parts, as an A2A client builds one. */
export function textMessage(texts: string[], messageId = `test-${process.pid}-${(sent += 1)}`): Message {
  return {
    messageId,
    contextId: '',
    taskId: '',
    role: 1,
    parts: texts.map((value) => ({ content: { $case: 'text' as const, value }, metadata: undefined, filename: '', mediaType: 'text/plain' })),
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

/** Sends with the token as a bearer header, the way an agent configures its client. */
export function send(client: Client, message: Message, token?: string): Promise<unknown> {
  return client.sendMessage(
    { message, tenant: '', configuration: undefined, metadata: undefined },
    token ? { serviceParameters: { Authorization: `Bearer ${token}` } } : undefined,
  );
}

/** A JSON-RPC error the SDK client threw: its code, and the room's problem as A2A 1.0 carries it (ErrorInfo metadata). */
export interface RpcFailure {
  code: number;
  reason: string;
  problem: Record<string, string>;
}

export async function rpcFailure(promise: Promise<unknown>): Promise<RpcFailure> {
  let thrown: unknown;
  try {
    await promise;
  } catch (error) {
    thrown = error;
  }
  if (thrown === undefined) throw new Error('expected the call to fail');
  const failure = thrown as { envelopeCode?: number; data?: unknown; errorResponse?: { error: { code: number; data?: unknown } } };
  const code = failure.errorResponse?.error.code ?? failure.envelopeCode ?? 0;
  const data = failure.errorResponse?.error.data ?? failure.data;
  const info = (Array.isArray(data) ? data[0] : undefined) as { reason?: string; metadata?: Record<string, string> } | undefined;
  return { code, reason: info?.reason ?? '', problem: info?.metadata ?? {} };
}

/** The text and data parts of an answer message. */
export function partsOf(answer: unknown): { text: string; data: Record<string, unknown> } {
  const message = answer as Message;
  let text = '';
  let data: Record<string, unknown> = {};
  for (const part of message.parts) {
    if (part.content?.$case === 'text') text = part.content.value;
    if (part.content?.$case === 'data') data = part.content.value as Record<string, unknown>;
  }
  return { text, data };
}
