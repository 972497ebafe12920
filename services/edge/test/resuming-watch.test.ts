import { randomUUID } from 'node:crypto';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { clientOptions, HealthChecker, serviceClient, unaryCall } from '@agentroom/kit/grpc';
import { newCursorSecret } from '@agentroom/kit/http';
import { freePort, type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { messagingProto, roomProto, type UpsertAgentResponse__Output } from '@agentroom/proto';
import type { Message } from '@agentroom/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resumingWatch, type UpstreamWatch } from '../src/gateways/upstream.js';
import { messagingFeeds } from '../src/live/routes.js';

/**
 * An inbox's live feed outlives the messaging replica serving it: two messaging processes on one
 * Redis, dialled as one target, each killed with SIGKILL in turn (the first started again on its
 * port before the second goes); whichever carried the watch, edge opens it again on the other after
 * the last message, and the subscriber gets every message once, on a watch that never ended.
 */
const script = (service: string): string => fileURLToPath(new URL(`../../${service}/dist/main.js`, import.meta.url));

function run(service: string, env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, [script(service)], {
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}

async function serving(address: string): Promise<void> {
  const health = new HealthChecker(address);
  try {
    const deadline = Date.now() + 20_000;
    while ((await health.check()) !== 'SERVING') {
      if (Date.now() > deadline) throw new Error(`nothing serves at ${address}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } finally {
    health.close();
  }
}

async function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGKILL');
  await exited;
}

describe('a watch of an inbox, when the messaging replica serving it dies', () => {
  let redis: LocalRedis;
  let room: ChildProcess;
  const messaging = new Map<string, ChildProcess>();
  let env: Record<string, string>;
  let addresses: [string, string];
  let agentId: string;

  const startMessaging = async (address: string): Promise<void> => {
    messaging.set(address, run('messaging', { ...env, MESSAGING_GRPC_ADDR: address }));
    await serving(address);
  };

  beforeAll(async () => {
    redis = await startRedisServer();
    const roomAddress = `127.0.0.1:${await freePort()}`;
    env = { REDIS_URL: redis.url, CURSOR_SECRET: newCursorSecret(), ROOM_ADDR: roomAddress };
    room = run('room', { ...env, ROOM_GRPC_ADDR: roomAddress });
    addresses = [`127.0.0.1:${await freePort()}`, `127.0.0.1:${await freePort()}`];
    await Promise.all([serving(roomAddress), ...addresses.map(startMessaging)]);
    const RoomService = roomProto().RoomService;
    const client = new RoomService(roomAddress, grpc.credentials.createInsecure(), clientOptions(RoomService.service));
    try {
      const made = await unaryCall<UpsertAgentResponse__Output>(2_000, (metadata, options, callback) =>
        client.upsertAgent({ agent: { agentName: 'listener', humanLabel: 'Ada', scopes: ['messages:read', 'messages:write'] } }, metadata, options, callback),
      );
      agentId = made.agent?.id ?? '';
    } finally {
      client.close();
    }
  }, 60_000);

  afterAll(async () => {
    await Promise.all([room, ...messaging.values()].filter((child) => child !== undefined).map(kill));
    await redis?.stop();
  });

  it('is opened again on the other replica after the last message: every message once, no end', async () => {
    const both = serviceClient(messagingProto().MessagingService, `ipv4:${addresses.join(',')}`);
    const received: string[] = [];
    const ends: Error[] = [];
    const { watchInbox } = messagingFeeds(both);
    const watch: UpstreamWatch<Message> = resumingWatch((afterId) => watchInbox(agentId, afterId), undefined);
    watch.onItem((message) => received.push(message.text));
    watch.onEnd((error) => ends.push(error));
    await watch.positioned;
    // Sent through the replica known to be alive, so no send is lost to the kill itself.
    const send = async (through: string, text: string): Promise<void> => {
      const one = serviceClient(messagingProto().MessagingService, through);
      try {
        await one.call('sendMessage', { fromAgentId: agentId, toAgentId: agentId, text, via: 'VIA_REST', callKey: randomUUID() });
      } finally {
        one.close();
      }
    };
    const arrived = async (count: number): Promise<void> => {
      const deadline = Date.now() + 10_000;
      while (received.length < count && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    };
    const [first, second] = addresses;
    try {
      await send(first, 'one');
      await arrived(1);
      await kill(messaging.get(first) as ChildProcess);
      await send(second, 'two');
      await arrived(2);
      // The first comes back on its port before the second goes: the watch always has somewhere to go.
      await startMessaging(first);
      await kill(messaging.get(second) as ChildProcess);
      await send(first, 'three');
      await arrived(3);
    } finally {
      watch.cancel();
      both.close();
    }
    expect(received).toEqual(['one', 'two', 'three']);
    expect(ends).toEqual([]);
  }, 60_000);
});
