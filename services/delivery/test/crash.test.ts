import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { loadConfig } from '@agentroom/kit/config';
import { CLIENT_OPTIONS, unaryCall } from '@agentroom/kit/grpc';
import { type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { type ServiceProcess, startServiceProcess } from '@agentroom/testkit';
import { messagingProto, type MessagingServiceClient, type RoomServiceClient, type SendMessageResponse__Output } from '@agentroom/proto';
import { Webhook as Signer } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deliveryEnv, type RunningDelivery, start } from '../src/index.js';
import { agent, DEADLINE, deliveryCalls, percentile, type Received, roomClient, startReceiver, webhookHeaders } from './support.js';

const env = { SITE_URL: 'http://room.test', LOG_LEVEL: 'silent', SHUTDOWN_GRACE_MS: '1000' } as const;
const FAST = { leaseMs: 1_000, renewMs: 250, retryMs: 50, maxRetryMs: 250 };
const EVENTS = 200;

let room: ServiceProcess;
let roomGrpc: RoomServiceClient;
let redis: LocalRedis;
/** The messaging service, its own process as in a deployment. */
let messaging: ServiceProcess;
let messagingPort: number;
let messagingClient: MessagingServiceClient;

beforeAll(async () => {
  [room, redis] = await Promise.all([startServiceProcess({ service: 'room', addressVariable: 'ROOM_GRPC_ADDR', env }), startRedisServer()]);
  roomGrpc = roomClient(room.address);
  messaging = await startServiceProcess({ service: 'messaging', addressVariable: 'MESSAGING_GRPC_ADDR', env: { ...env, ROOM_ADDR: room.address } });
  messagingPort = Number(messaging.address.split(':').at(-1));
  messagingClient = new (messagingProto().MessagingService)(messaging.address, grpc.credentials.createInsecure(), CLIENT_OPTIONS);
});

afterAll(async () => {
  messagingClient.close();
  await messaging.stop();
  roomGrpc.close();
  await Promise.all([room.stop(), redis.stop()]);
});

function startDelivery(prefix: string): Promise<RunningDelivery> {
  return start(
    loadConfig(deliveryEnv, {
      ...env,
      DELIVERY_GRPC_ADDR: '127.0.0.1:0',
      MESSAGING_ADDR: `127.0.0.1:${messagingPort}`,
      WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true',
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: prefix,
    }),
    undefined,
    // A dead replica's jobs are taken over after 1 s idle (30 s in production), its lease after 1 s.
    { dispatcher: FAST, worker: { claimIdleMs: 1_000, concurrency: 16, promoteEveryMs: 50, retryDelaysMs: [200, 200, 200] } },
  );
}

function send(from: string, to: string, text: string): Promise<SendMessageResponse__Output> {
  return unaryCall<SendMessageResponse__Output>(DEADLINE, (metadata, options, callback) =>
    messagingClient.sendMessage({ fromAgentId: from, toAgentId: to, text, via: 'VIA_REST', callKey: randomUUID() }, metadata, options, callback),
  );
}

describe('crash safety (Redis): two delivery replicas, one dies abruptly mid-burst', () => {
  it('delivers every event of a burst at least once, repeats under the same webhook-id, once the survivor takes over', async () => {
    const [a, b] = [await startDelivery('crash'), await startDelivery('crash')];
    const receiver = await startReceiver();
    let survivor: RunningDelivery | undefined;
    try {
      await expect.poll(() => a.dispatcher.isFollowing || b.dispatcher.isFollowing, { timeout: 5_000 }).toBe(true);
      const [alice, bob] = [await agent(roomGrpc, 'alice'), await agent(roomGrpc, 'bob')];
      const created = await deliveryCalls(a.port).create(bob, `${receiver.url}/burst`, ['direct_message']);
      const signer = new Signer(created.secret);
      // Every request verified as a user's server would, the first time it is seen.
      const verified: Received[] = [];
      receiver.onRequest = (request) => {
        signer.verify(request.body, webhookHeaders(request));
        verified.push(request);
      };
      // The dispatcher's holder dies: the other must take over both its lease and its unacked jobs.
      const [victim, other] = a.dispatcher.isFollowing ? [a, b] : [b, a];
      survivor = other;
      const started = Date.now();
      const texts: string[] = [];
      let crashed = false;
      const sending = (async () => {
        for (let i = 0; i < EVENTS; i += 10) {
          await Promise.all(
            Array.from({ length: 10 }, (_, j) => {
              texts.push(`burst ${i + j}`);
              return send(alice, bob, `burst ${i + j}`);
            }),
          );
        }
      })();
      // Mid-burst: once some deliveries arrived, and jobs are in flight.
      await expect.poll(() => verified.length, { timeout: 10_000, interval: 1 }).toBeGreaterThanOrEqual(40);
      await victim.crash();
      crashed = true;
      const crashedAt = verified.length;
      await sending;
      await expect.poll(() => new Set(verified.map((r) => r.headers['webhook-id'])).size, { timeout: 15_000, interval: 20 }).toBe(EVENTS);
      const seconds = (Date.now() - started) / 1000;
      // Each event's text arrived, and a repeat is the same delivery: same id, same body.
      const byId = new Map<string, string>();
      for (const request of verified) {
        const id = String(request.headers['webhook-id']);
        if (byId.has(id)) expect(request.body).toBe(byId.get(id));
        byId.set(id, request.body);
      }
      const delivered = [...byId.values()].map((json) => (JSON.parse(json) as { data: { message: { text: string } } }).data.message.text);
      expect(delivered.sort()).toEqual([...texts].sort());
      expect(crashed).toBe(true);
      console.log(
        `crash test: ${EVENTS} events, ${verified.length} requests (${verified.length - EVENTS} repeats, ${crashedAt} before the crash), all delivered in ${seconds.toFixed(2)} s including the 1 s takeover`,
      );
    } finally {
      receiver.onRequest = undefined;
      await survivor?.stop();
      await receiver.close();
    }
  });

  it('measures deliveries per second of a burst on one Redis, two replicas', async () => {
    const [a, b] = [await startDelivery('rate'), await startDelivery('rate')];
    const receiver = await startReceiver();
    try {
      await expect.poll(() => a.dispatcher.isFollowing || b.dispatcher.isFollowing, { timeout: 5_000 }).toBe(true);
      const [alice, bob] = [await agent(roomGrpc, 'alice'), await agent(roomGrpc, 'bob')];
      const created = await deliveryCalls(a.port).create(bob, `${receiver.url}/rate`, ['direct_message']);
      const signer = new Signer(created.secret);
      let count = 0;
      receiver.onRequest = (request) => {
        signer.verify(request.body, webhookHeaders(request));
        count += 1;
      };
      const started = Date.now();
      for (let i = 0; i < 500; i += 50) await Promise.all(Array.from({ length: 50 }, (_, j) => send(alice, bob, `rate ${i + j}`)));
      const sentIn = (Date.now() - started) / 1000;
      await expect.poll(() => count, { timeout: 15_000, interval: 5 }).toBe(500);
      const seconds = (Date.now() - started) / 1000;
      console.log(
        `burst: 500 events sent in ${sentIn.toFixed(2)} s, delivered (verified) in ${seconds.toFixed(2)} s: ${(500 / seconds).toFixed(0)} deliveries/s`,
      );
      expect(count).toBe(500);
      // Then one at a time: the latency from a send to its verified receipt, Redis behind delivery.
      const latencies: number[] = [];
      for (let i = 0; i < 50; i += 1) {
        const before = count;
        const sentAt = performance.now();
        await send(alice, bob, `one ${i}`);
        await expect.poll(() => count, { timeout: 2_000, interval: 1 }).toBe(before + 1);
        latencies.push(performance.now() - sentAt);
      }
      console.log(
        `webhook latency, send to verified receipt (Redis, two replicas, 50 messages): p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${percentile(latencies, 99).toFixed(1)} ms`,
      );
      expect(percentile(latencies, 99)).toBeLessThan(1_000);
    } finally {
      receiver.onRequest = undefined;
      await Promise.all([a.stop(), b.stop()]);
      await receiver.close();
    }
  });
});
