import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import * as grpc from '@grpc/grpc-js';
import { CLIENT_OPTIONS, unaryCall } from '@agentroom/kit/grpc';
import {
  type CreatePostResponse__Output,
  type CreateWebhookResponse__Output,
  deliveryProto,
  type DeliveryServiceClient,
  type EnableWebhookResponse__Output,
  type ListNotificationsResponse__Output,
  type ListWebhooksResponse__Output,
  messagingProto,
  type MessagingServiceClient,
  type RotateWebhookSecretResponse__Output,
  roomProto,
  type RoomServiceClient,
  type SendTestEventResponse__Output,
  type UpsertAgentResponse__Output,
} from '@agentroom/proto';

export const DEADLINE = 2_000;

/** One request a receiver got, as a user's server sees it. */
export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

/**
 * A webhook receiver on 127.0.0.1: records every request (and every connection), and answers each
 * path with the statuses queued for it, then 200.
 */
export interface Receiver {
  url: string;
  received: Received[];
  connections: number;
  /** Answers the next requests to `path` with these statuses, in order. */
  answer(path: string, ...statuses: number[]): void;
  /** Called on each request (after it is recorded); the answer waits for what it answers. */
  onRequest: ((request: Received) => void | Promise<void>) | undefined;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const queued = new Map<string, number[]>();
  const receiver: Receiver = {
    url: '',
    received: [],
    connections: 0,
    answer: (path, ...statuses) => queued.set(path, [...(queued.get(path) ?? []), ...statuses]),
    onRequest: undefined,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const request = { path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() };
      receiver.received.push(request);
      const statuses = queued.get(request.path) ?? [];
      const status = statuses.shift() ?? 200;
      void Promise.resolve(receiver.onRequest?.(request)).finally(() => {
        res.statusCode = status;
        res.end('ok');
      });
    });
  });
  server.on('connection', () => (receiver.connections += 1));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const address = server.address();
  receiver.url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  server.keepAliveTimeout = 1;
  return receiver;
}

/** The webhook headers of a request, as `standardwebhooks` verify() takes them. */
export function webhookHeaders(request: Received): Record<string, string> {
  const header = (name: string): string => {
    const value = request.headers[name];
    return Array.isArray(value) ? (value[0] ?? '') : (value ?? '');
  };
  return { 'webhook-id': header('webhook-id'), 'webhook-timestamp': header('webhook-timestamp'), 'webhook-signature': header('webhook-signature') };
}

export function roomClient(address: string): RoomServiceClient {
  return new (roomProto().RoomService)(address, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
}

let agents = 0;

/** Makes an agent in the real room service, as auth does on approval; a name of its own. */
export async function agent(room: RoomServiceClient, name: string): Promise<string> {
  agents += 1;
  const made = await unaryCall<UpsertAgentResponse__Output>(DEADLINE, (metadata, options, callback) =>
    room.upsertAgent(
      { agent: { agentName: `${name}${agents}${process.pid}`, humanLabel: 'Ada', scopes: ['posts:write', 'messages:read', 'messages:write'] } },
      metadata,
      options,
      callback,
    ),
  );
  return made.agent?.id ?? '';
}

/** A post in the room, as edge makes it; `@<id>` in the text mentions that agent. */
export async function post(room: RoomServiceClient, agentId: string, text: string, replyTo = ''): Promise<string> {
  const made = await unaryCall<CreatePostResponse__Output>(DEADLINE, (metadata, options, callback) =>
    room.createPost({ agentId, text, via: 'VIA_MCP', replyTo, callKey: randomUUID() }, metadata, options, callback),
  );
  return made.post?.id ?? '';
}

/** The DeliveryService's calls, as Promises. */
export function deliveryCalls(port: number) {
  const client: DeliveryServiceClient = new (deliveryProto().DeliveryService)(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
  return {
    client,
    create: (agentId: string, url: string, events: string[] = ['mention', 'reply', 'direct_message']) =>
      unaryCall<CreateWebhookResponse__Output>(DEADLINE, (metadata, options, callback) =>
        client.createWebhook({ agentId, url, events }, metadata, options, callback),
      ),
    list: (agentId: string) =>
      unaryCall<ListWebhooksResponse__Output>(DEADLINE, (metadata, options, callback) => client.listWebhooks({ agentId }, metadata, options, callback)),
    remove: (agentId: string, webhookId: string) =>
      unaryCall<object>(DEADLINE, (metadata, options, callback) => client.deleteWebhook({ agentId, webhookId }, metadata, options, callback)),
    rotate: (agentId: string, webhookId: string) =>
      unaryCall<RotateWebhookSecretResponse__Output>(DEADLINE, (metadata, options, callback) =>
        client.rotateWebhookSecret({ agentId, webhookId }, metadata, options, callback),
      ),
    enable: (agentId: string, webhookId: string) =>
      unaryCall<EnableWebhookResponse__Output>(DEADLINE, (metadata, options, callback) =>
        client.enableWebhook({ agentId, webhookId }, metadata, options, callback),
      ),
    test: (agentId: string, webhookId: string) =>
      unaryCall<SendTestEventResponse__Output>(DEADLINE, (metadata, options, callback) =>
        client.sendTestEvent({ agentId, webhookId }, metadata, options, callback),
      ),
  };
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0;
}

/**
 * Waits until the messaging process (started as its own process, as in a deployment) turns posts
 * into notifications: a probe post mentioning a probe agent, again every 100 ms, until that agent's
 * feed holds one.
 */
export async function untilNotifying(room: RoomServiceClient, messagingAddress: string, timeoutMs = 10_000): Promise<void> {
  const client: MessagingServiceClient = new (messagingProto().MessagingService)(messagingAddress, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
  try {
    const [author, probe] = [await agent(room, 'probe-author'), await agent(room, 'probe')];
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      await post(room, author, `@${probe} are you there?`);
      await new Promise((resolve) => setTimeout(resolve, 100));
      const listed = await unaryCall<ListNotificationsResponse__Output>(DEADLINE, (metadata, options, callback) =>
        client.listNotifications({ agentId: probe, limit: 1, cursor: '', unreadOnly: false }, metadata, options, callback),
      );
      if (listed.notifications.length > 0) return;
    }
    throw new Error(`messaging at ${messagingAddress} did not notify within ${timeoutMs} ms`);
  } finally {
    client.close();
  }
}
