import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { clientOptions, retryPlan, RETRY_POLICY, serviceClient, unaryCall } from '../src/grpc/index.js';
import { freePort, type LocalRedis, startRedisServer } from '../src/local/index.js';
import { type ServiceProcess, startServiceProcess } from '@agentroom/testkit';
import {
  authProto,
  deliveryProto,
  type ListMessagesResponse__Output,
  type ListPostsResponse__Output,
  messagingProto,
  roomProto,
  type RoomServiceClient,
  type UpsertAgentResponse__Output,
} from '@agentroom/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/** Every service's generated client, by the name docs/decisions.md §18 gives it. */
const CLIENTS = {
  RoomService: roomProto().RoomService,
  MessagingService: messagingProto().MessagingService,
  AuthService: authProto().AuthService,
  DeliveryService: deliveryProto().DeliveryService,
};

/** The rows of the table in docs/decisions.md §18: `| `Service.Method` | yes/no | why |`. */
function documentedRetries(): { call: string; retried: boolean }[] {
  const decisions = readFileSync(new URL('../../../docs/decisions.md', import.meta.url), 'utf8');
  const section = decisions.slice(decisions.indexOf('\n## 18. '));
  const end = section.indexOf('\n## ', 1);
  return [...(end < 0 ? section : section.slice(0, end)).matchAll(/^\| `(\w+\.\w+)` \| (yes|no) \| \S/gm)].map(([, call = '', retried]) => ({
    call,
    retried: retried === 'yes',
  }));
}

describe('which gRPC calls are retried on another replica', () => {
  const plan = Object.entries(CLIENTS).flatMap(([name, client]) =>
    retryPlan(client.service).map((method) => ({ ...method, call: `${name}.${method.method}` })),
  );

  it('reads every method of every service from its proto', () => {
    expect(plan.map((method) => method.call)).toContain('RoomService.CreatePost');
    expect(plan.map((method) => method.call)).toContain('MessagingService.WatchEvents');
    for (const method of plan) expect(method.service, method.call).toMatch(/^agentroom\.\w+\.v1\.\w+Service$/);
    // Retried exactly when the proto says a repeat is harmless.
    for (const method of plan) expect(method.retried, method.call).toBe(method.level !== 'IDEMPOTENCY_UNKNOWN');
  });

  it('docs/decisions.md §18 lists every RPC, and says it is retried exactly when the code retries it', () => {
    const documented = documentedRetries();
    expect(documented.map((row) => row.call).sort()).toEqual(plan.map((method) => method.call).sort());
    for (const row of documented) expect(row.retried, row.call).toBe(plan.find((method) => method.call === row.call)?.retried);
  });

  it('retries CreatePost and SendMessage, which every caller names with its call key', () => {
    expect(plan.find((method) => method.call === 'RoomService.CreatePost')).toMatchObject({ retried: true, level: 'IDEMPOTENT' });
    expect(plan.find((method) => method.call === 'MessagingService.SendMessage')).toMatchObject({ retried: true, level: 'IDEMPOTENT' });
  });

  it('never retries a write a repeat could apply twice', () => {
    const neverRetried = plan.filter((method) => !method.retried).map((method) => method.call);
    for (const write of ['RoomService.UpsertAgent', 'AuthService.PollDeviceFlow', 'AuthService.ExchangeToken', 'DeliveryService.CreateWebhook']) {
      expect(neverRetried).toContain(write);
    }
  });

  it('builds for each service a service config that grpc-js accepts, with the retry policy on the retried methods only', () => {
    for (const [name, Client] of Object.entries(CLIENTS)) {
      const options = clientOptions(Client.service);
      expect(options['grpc.enable_retries'], name).toBe(1);
      // grpc-js validates the service config as the channel is made, and throws on a bad one.
      new Client('127.0.0.1:1', grpc.credentials.createInsecure(), options).close();
      const config = JSON.parse(String(options['grpc.service_config'])) as {
        loadBalancingConfig: unknown[];
        methodConfig: { name: { service: string; method: string }[]; retryPolicy: unknown }[];
      };
      expect(config.loadBalancingConfig).toEqual([{ round_robin: {} }]);
      const named = config.methodConfig.flatMap((entry) => entry.name.map(({ method }) => `${name}.${method}`));
      expect(named.sort(), name).toEqual(
        plan
          .filter((method) => method.call.startsWith(`${name}.`) && method.retried)
          .map((method) => method.call)
          .sort(),
      );
      for (const entry of config.methodConfig) expect(entry.retryPolicy).toEqual(RETRY_POLICY);
    }
  });
});

/** Calls `listPosts` or `upsertAgent` against a target, answering the error it ended with and how many attempts it took. */
function attemptsOf(client: RoomServiceClient, method: 'listPosts' | 'upsertAgent'): Promise<{ code: number; attempts: number }> {
  return new Promise((resolve) => {
    const done = (error: grpc.ServiceError | null): void => {
      const previous = error?.metadata?.get('grpc-previous-rpc-attempts')[0];
      resolve({ code: error?.code ?? grpc.status.OK, attempts: 1 + Number(previous ?? 0) });
    };
    const options = { deadline: Date.now() + 5_000 };
    if (method === 'listPosts') client.listPosts({ limit: 1 }, new grpc.Metadata(), options, done);
    else client.upsertAgent({ agent: { agentName: 'never made twice', humanLabel: 'Ada', scopes: ['posts:write'] } }, new grpc.Metadata(), options, done);
  });
}

/**
 * Eight workers make writes, each call with one call key whichever attempt carries it, until 500 have
 * been answered, and `victim` is killed with SIGKILL once 200 have: the last 300 or so go on through
 * the kill. Answers the texts answered and the calls that failed.
 */
async function writeThroughKill(
  victim: ServiceProcess,
  what: string,
  write: (text: string, callKey: string) => Promise<void>,
): Promise<{ answered: Set<string>; failures: unknown[] }> {
  const failures: unknown[] = [];
  const answered = new Set<string>();
  let sent = 0;
  let killed = false;
  const worker = async (): Promise<void> => {
    while (!killed || answered.size < 500) {
      const text = `${what} ${(sent += 1)}`;
      try {
        await write(text, randomUUID());
        answered.add(text);
      } catch (error) {
        failures.push(error);
      }
      if (!killed && answered.size >= 200) {
        killed = true;
        process.kill(victim.pid, 'SIGKILL');
      }
    }
  };
  await Promise.all([1, 2, 3, 4, 5, 6, 7, 8].map(worker));
  return { answered, failures };
}

describe('retries against real room processes on one Redis', () => {
  const RoomService = roomProto().RoomService;
  let redis: LocalRedis | undefined;
  const rooms: ServiceProcess[] = [];
  /** Each room's /metrics, in the order of `rooms`. */
  const metrics: string[] = [];

  beforeAll(async () => {
    redis = await startRedisServer();
    const env = { REDIS_URL: redis.url, LOG_LEVEL: 'warn' };
    const adminPorts = [await freePort(), await freePort()];
    rooms.push(
      ...(await Promise.all(
        adminPorts.map((port) => startServiceProcess({ service: 'room', addressVariable: 'ROOM_GRPC_ADDR', env: { ...env, ADMIN_PORT: String(port) } })),
      )),
    );
    metrics.push(...adminPorts.map((port) => `http://127.0.0.1:${port}/metrics`));
  }, 30_000);

  /** How many ListPosts calls the room at `url` has answered. */
  const listPostsServed = async (url: string): Promise<number> => {
    const text = await (await fetch(url)).text();
    const line = text
      .split('\n')
      .find((row) => row.startsWith('agentroom_grpc_server_handled_seconds_count{') && row.includes('method="ListPosts"') && row.includes('code="OK"'));
    return line === undefined ? 0 : Number(line.split(' ').at(-1));
  };

  afterAll(async () => {
    await Promise.all(rooms.map((room) => room.stop()));
    await redis?.stop();
  });

  it('a read to an address nobody listens on is tried RETRY_POLICY.maxAttempts times; a new agent, once', async () => {
    const nobody = `127.0.0.1:${await freePort()}`;
    // A client each: grpc-js writes the attempts into the failure's metadata, which one channel's calls may share.
    const attempts = async (method: 'listPosts' | 'upsertAgent'): Promise<{ code: number; attempts: number }> => {
      const client = new RoomService(nobody, grpc.credentials.createInsecure(), clientOptions(RoomService.service));
      try {
        return await attemptsOf(client, method);
      } finally {
        client.close();
      }
    };
    expect(await attempts('upsertAgent')).toEqual({ code: grpc.status.UNAVAILABLE, attempts: 1 });
    expect(await attempts('listPosts')).toEqual({ code: grpc.status.UNAVAILABLE, attempts: RETRY_POLICY.maxAttempts });
  });

  it('reads go on through the SIGKILL of one of two rooms: every call answered, none failed', async () => {
    const [first, second] = rooms as [ServiceProcess, ServiceProcess];
    // As edge calls a read: through the typed client, which makes it once more for a replica killed after its answer began.
    const client = serviceClient(RoomService, `ipv4:${first.address},${second.address}`, { deadlineMs: 2_000 });
    const list = (): Promise<ListPostsResponse__Output> => client.call('listPosts', { limit: 5 });
    // Both replicas connected and answering first: the kill must leave one, not a client still dialling the other.
    const deadline = Date.now() + 10_000;
    while (Math.min(...(await Promise.all(metrics.map(listPostsServed)))) === 0 && Date.now() < deadline) await list();
    const failures: unknown[] = [];
    let answered = 0;
    let killed = false;
    const worker = async (): Promise<void> => {
      // Calls keep going until 300 have been answered after the kill.
      while (!killed || answered < 300) {
        try {
          await list();
          answered += 1;
        } catch (error) {
          failures.push(error);
        }
        if (!killed && answered >= 200) {
          killed = true;
          answered = 0;
          process.kill(first.pid, 'SIGKILL');
        }
      }
    };
    try {
      await Promise.all([1, 2, 3, 4].map(worker));
    } finally {
      client.close();
    }
    expect(failures).toEqual([]);
  }, 30_000);

  it('posts go on through the SIGKILL of one of two rooms: every call answered, each post made once', async () => {
    const env = { REDIS_URL: redis?.url ?? '', LOG_LEVEL: 'warn' };
    const pair = await Promise.all([0, 1].map(() => startServiceProcess({ service: 'room', addressVariable: 'ROOM_GRPC_ADDR', env })));
    rooms.push(...pair);
    const [first, second] = pair as [ServiceProcess, ServiceProcess];
    const client = new RoomService(`ipv4:${first.address},${second.address}`, grpc.credentials.createInsecure(), clientOptions(RoomService.service));
    const made = await unaryCall<UpsertAgentResponse__Output>(2_000, (metadata, options, callback) =>
      client.upsertAgent({ agent: { agentName: 'writer', humanLabel: 'Ada', scopes: ['posts:write'] } }, metadata, options, callback),
    );
    const agentId = made.agent?.id ?? '';
    try {
      // As edge makes a post: through the typed client, which repeats CreatePost (IDEMPOTENT in its proto).
      const typed = serviceClient(RoomService, `ipv4:${first.address},${second.address}`, { deadlineMs: 2_000 });
      const { answered, failures } = await writeThroughKill(first, 'post', async (text, callKey) => {
        await typed.call('createPost', { agentId, text, via: 'VIA_REST', callKey });
      }).finally(() => typed.close());
      expect(failures).toEqual([]);
      // Every post the room holds was answered, once: none made twice by a call sent again.
      const held: string[] = [];
      let cursor = '';
      do {
        const page = await unaryCall<ListPostsResponse__Output>(2_000, (metadata, options, callback) =>
          client.listPosts({ limit: 50, cursor }, metadata, options, callback),
        );
        held.push(...page.posts.filter((post) => post.agentId === agentId).map((post) => post.text));
        cursor = page.nextCursor;
      } while (cursor !== '');
      expect(held.sort()).toEqual([...answered].sort());
    } finally {
      client.close();
    }
  }, 40_000);

  it('messages go on through the SIGKILL of one of two messaging replicas: every call answered, each message sent once', async () => {
    const env = { REDIS_URL: redis?.url ?? '', LOG_LEVEL: 'warn' };
    // A room of its own, for messaging's agent lookups: the tests before may have killed the others.
    const room = await startServiceProcess({ service: 'room', addressVariable: 'ROOM_GRPC_ADDR', env });
    rooms.push(room);
    const pair = await Promise.all(
      [0, 1].map(() => startServiceProcess({ service: 'messaging', addressVariable: 'MESSAGING_GRPC_ADDR', env: { ...env, ROOM_ADDR: room.address } })),
    );
    const [first, second] = pair as [ServiceProcess, ServiceProcess];
    const MessagingService = messagingProto().MessagingService;
    const client = new MessagingService(`ipv4:${first.address},${second.address}`, grpc.credentials.createInsecure(), clientOptions(MessagingService.service));
    const roomClient = new RoomService(room.address, grpc.credentials.createInsecure(), clientOptions(RoomService.service));
    const agent = async (agentName: string): Promise<string> => {
      const made = await unaryCall<UpsertAgentResponse__Output>(2_000, (metadata, options, callback) =>
        roomClient.upsertAgent({ agent: { agentName, humanLabel: 'Ada', scopes: ['messages:write', 'messages:read'] } }, metadata, options, callback),
      );
      return made.agent?.id ?? '';
    };
    const [from, to] = [await agent('sender'), await agent('recipient')];
    try {
      // As edge sends a message: through the typed client, which repeats SendMessage (IDEMPOTENT in its proto).
      const typed = serviceClient(MessagingService, `ipv4:${first.address},${second.address}`, { deadlineMs: 2_000 });
      const { answered, failures } = await writeThroughKill(first, 'message', async (text, callKey) => {
        await typed.call('sendMessage', { fromAgentId: from, toAgentId: to, text, via: 'VIA_REST', callKey });
      }).finally(() => typed.close());
      expect(failures).toEqual([]);
      // Every message the inbox holds was answered, once: none sent twice by a call sent again.
      const held: string[] = [];
      let cursor = '';
      do {
        const page = await unaryCall<ListMessagesResponse__Output>(2_000, (metadata, options, callback) =>
          client.listMessages({ agentId: to, limit: 50, cursor }, metadata, options, callback),
        );
        held.push(...page.messages.map((message) => message.text));
        cursor = page.nextCursor;
      } while (cursor !== '');
      expect(held.sort()).toEqual([...answered].sort());
    } finally {
      client.close();
      roomClient.close();
      await Promise.all(pair.map((one) => one.stop()));
    }
  }, 40_000);

  it('an UNAVAILABLE the room answers itself (its storage is down) is not asked of the other room', async () => {
    const alive = rooms.at(-1) as ServiceProcess;
    const client = new RoomService(alive.address, grpc.credentials.createInsecure(), clientOptions(RoomService.service));
    await redis?.stop();
    redis = undefined;
    try {
      // Every replica shares the storage: one attempt, and the caller hears of it at once.
      expect(await attemptsOf(client, 'listPosts')).toEqual({ code: grpc.status.UNAVAILABLE, attempts: 1 });
    } finally {
      client.close();
    }
  }, 20_000);
});
