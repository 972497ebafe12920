import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { HealthChecker } from '@agentroom/kit/grpc';
import { freePort, type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import dns2 from 'dns2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * In Kubernetes, edge dials `dns:///<release>-room-headless:50051`: the name resolves to every room
 * pod, and one edge process must spread its calls over all of them. Here two room processes listen on
 * one port at two loopback addresses (127.0.0.1 and 127.0.0.2), a real DNS server answers the name
 * with both, and a real edge process resolves it (grpc-js's DNS resolver, pointed at our server).
 */
const NAME = 'room.agentroom.test';
const script = (service: string): string => fileURLToPath(new URL(`../../${service}/dist/main.js`, import.meta.url));

interface Proc {
  child: ChildProcess;
  admin: number;
}

function run(service: string, env: Record<string, string>, admin: number): Proc {
  const child = spawn(process.execPath, [script(service)], {
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', ADMIN_PORT: String(admin), ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return { child, admin };
}

async function stop(proc: Proc): Promise<void> {
  if (proc.child.exitCode !== null || proc.child.signalCode !== null) return;
  const exited = once(proc.child, 'exit');
  proc.child.kill('SIGTERM');
  await exited;
}

/** How many ListPosts calls a room process has answered, from its own /metrics. */
async function listPostsServed(proc: Proc): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${proc.admin}/metrics`)).text();
  const line = text
    .split('\n')
    .find((row) => row.startsWith('agentroom_grpc_server_handled_seconds_count{') && row.includes('method="ListPosts"') && row.includes('code="OK"'));
  return line === undefined ? 0 : Number(line.split(' ').at(-1));
}

/**
 * A read of the first page that reaches the room: without `no-cache`, edge would answer from its
 * memory of the first page, and its posts stream (opened by the first such read) would make calls of its own.
 */
const fromTheRoom: RequestInit = { headers: { 'cache-control': 'no-cache' } };

async function until(what: string, ready: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await ready().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`${what} not ready within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('one edge spreads its calls over every room replica behind one DNS name', () => {
  let redis: LocalRedis;
  let dns: ReturnType<typeof dns2.createServer>;
  const rooms: Proc[] = [];
  let edge: Proc;
  let edgeUrl: string;

  beforeAll(async () => {
    redis = await startRedisServer();
    const dnsPort = await freePort();
    dns = dns2.createServer({
      udp: true,
      handle: (request, send) => {
        const response = dns2.Packet.createResponseFromRequest(request);
        const question = request.questions[0];
        if (question?.name === NAME && question.type === dns2.Packet.TYPE.A) {
          for (const address of ['127.0.0.1', '127.0.0.2']) {
            response.answers.push(dns2.Packet.createResourceFromQuestion(question, { ttl: 5, address }));
          }
        }
        send(response);
      },
    });
    await dns.listen({ udp: { port: dnsPort, address: '127.0.0.1' } });

    const roomPort = await freePort();
    for (const host of ['127.0.0.1', '127.0.0.2']) {
      rooms.push(run('room', { ROOM_GRPC_ADDR: `${host}:${roomPort}`, REDIS_URL: redis.url }, await freePort()));
    }
    await Promise.all(
      ['127.0.0.1', '127.0.0.2'].map(async (host) => {
        const health = new HealthChecker(`${host}:${roomPort}`);
        try {
          await until(`room at ${host}`, async () => (await health.check()) === 'SERVING');
        } finally {
          health.close();
        }
      }),
    );

    const edgePort = await freePort();
    edge = run(
      'edge',
      {
        // grpc-js asks the DNS server named in the target (`dns://<server>/<name>:<port>`) with this set.
        GRPC_NODE_USE_ALTERNATIVE_RESOLVER: 'true',
        ROOM_ADDR: (dnsTarget = `dns://127.0.0.1:${dnsPort}/${NAME}:${roomPort}`),
        AUTH_ADDR: `127.0.0.1:${await freePort()}`,
        MESSAGING_ADDR: `127.0.0.1:${await freePort()}`,
        EDGE_PORT: String(edgePort),
        EDGE_HOST: '127.0.0.1',
        REDIS_URL: redis.url,
      },
      await freePort(),
    );
    edgeUrl = `http://127.0.0.1:${edgePort}/api/v1/posts`;
    await until('edge', async () => (await fetch(edgeUrl, fromTheRoom)).status === 200);
  }, 60_000);

  let dnsTarget: string;

  afterAll(async () => {
    await Promise.all([edge, ...rooms].filter((proc) => proc !== undefined).map(stop));
    await dns?.close();
    await redis?.stop();
  });

  it('both rooms serve a share of one edge calls, and a room that leaves costs no call', async () => {
    const before = await Promise.all(rooms.map(listPostsServed));
    const calls = 40;
    for (let i = 0; i < calls; i += 1) expect((await fetch(edgeUrl, fromTheRoom)).status).toBe(200);
    const served = (await Promise.all(rooms.map(listPostsServed))).map((count, i) => count - (before[i] ?? 0));
    expect(served.reduce((sum, count) => sum + count, 0)).toBe(calls);
    // round_robin: the calls alternate, so each replica takes about half.
    for (const count of served) expect(count).toBeGreaterThanOrEqual(calls / 4);

    // One room shuts down (SIGTERM, as a rollout does): its health turns NOT_SERVING, the
    // connection closes, and every next call goes to the other.
    await stop(rooms[0] as Proc);
    const after = await listPostsServed(rooms[1] as Proc);
    for (let i = 0; i < 20; i += 1) expect((await fetch(edgeUrl, fromTheRoom)).status).toBe(200);
    expect((await listPostsServed(rooms[1] as Proc)) - after).toBe(20);
  });

  it('on SIGTERM: not ready at once, still serving (closing connections) for SHUTDOWN_DELAY_MS, live streams told to reconnect, then exit 0', async () => {
    const port = await freePort();
    const adminPort = await freePort();
    const leaving = run(
      'edge',
      {
        GRPC_NODE_USE_ALTERNATIVE_RESOLVER: 'true',
        ROOM_ADDR: dnsTarget,
        AUTH_ADDR: `127.0.0.1:${await freePort()}`,
        MESSAGING_ADDR: `127.0.0.1:${await freePort()}`,
        EDGE_PORT: String(port),
        EDGE_HOST: '127.0.0.1',
        REDIS_URL: redis.url,
        SHUTDOWN_DELAY_MS: '1500',
      },
      adminPort,
    );
    const base = `http://127.0.0.1:${port}/api/v1`;
    const readyz = `http://127.0.0.1:${adminPort}/readyz`;
    await until('edge', async () => (await fetch(`${base}/posts`)).status === 200);
    expect((await fetch(`http://127.0.0.1:${adminPort}/livez`)).status).toBe(200);
    // Auth and messaging are not running here: readiness names them.
    const notReady = await fetch(readyz);
    expect(notReady.status).toBe(503);
    expect(await notReady.json()).toMatchObject({
      status: 'not_ready',
      checks: { room: 'ok', redis: 'ok', auth: expect.any(String), messaging: expect.any(String) },
    });

    const stream = await fetch(`${base}/posts/stream`);
    const reader = (stream.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    const exited = once(leaving.child, 'exit');
    leaving.child.kill('SIGTERM');
    await until('readiness draining', async () => ((await (await fetch(readyz)).json()) as { status: string }).status === 'draining', 1_000);
    const during = await fetch(`${base}/posts`);
    expect(during.status).toBe(200);
    expect(during.headers.get('connection')).toBe('close');

    let text = '';
    const decoder = new TextDecoder();
    for (;;) {
      const chunk = await reader.read();
      if (chunk.done) break;
      text += decoder.decode(chunk.value, { stream: true });
    }
    expect(text).toMatch(/retry: \d+\n: this server is shutting down; reconnect with Last-Event-ID/);
    expect((await exited)[0]).toBe(0);
  });
});
