// The record service as deployed (services/record/dist/main.js), in a process of its own that the
// search rows query over gRPC, as edge does; and what the rows ask of any record.
import { type ChildProcess, spawn } from 'node:child_process';
import { supervise } from './children.js';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { serviceClient, type ServiceClient } from '@agentroom/kit/grpc';
import { freePort, NODE_FLAGS } from '@agentroom/kit/local';
import { recordProto, type RecordServiceClient, roomProto } from '@agentroom/proto';

const READY_TIMEOUT_MS = 120_000;
/** A search over a million posts on a busy machine may take a while; the record's own statement timeout is the bound. */
const DEADLINE_MS = 30_000;

export type RecordClient = ServiceClient<RecordServiceClient>;

export function recordClient(address: string): RecordClient {
  return serviceClient(recordProto().RecordService, address, { deadlineMs: DEADLINE_MS });
}

/** Resident memory of process `pid` now (VmRSS), in bytes. */
export function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1];
  if (kib === undefined) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(kib) * 1024;
}

/** A service process of the bench's own: where it answers, and how to stop it. */
export interface ServiceProcess {
  pid: number;
  address: string;
  /** Why it exited, if it did before it was asked to. */
  exited(): string | undefined;
  stop(): Promise<void>;
}

export interface RecordProcess extends ServiceProcess {
  client: RecordClient;
}

/**
 * Starts `node services/<service>/dist/main.js` with `env`, its gRPC server on a free loopback port
 * (given as `addressVariable`), errors only in its log; ready once `ready(address)` answers true.
 */
async function startServiceProcess(
  name: string,
  service: string,
  addressVariable: string,
  env: NodeJS.ProcessEnv,
  ready: (address: string) => Promise<boolean>,
): Promise<ServiceProcess> {
  const address = `127.0.0.1:${await freePort()}`;
  const script = fileURLToPath(new URL(`../../services/${service}/dist/main.js`, import.meta.url));
  const child: ChildProcess = spawn(process.execPath, [...NODE_FLAGS, script], {
    env: {
      ...process.env,
      ADMIN_PORT: String(await freePort()),
      LOG_LEVEL: 'error',
      LOG_FORMAT: 'json',
      SHUTDOWN_GRACE_MS: '1000',
      REDIS_URL: undefined,
      DATABASE_URL: undefined,
      DATA_DIR: undefined,
      ...env,
      [addressVariable]: address,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  child.stderr?.on('data', (chunk: Buffer) => process.stderr.write(`[${name}] ${chunk.toString('utf8')}`));
  const supervised = supervise(child);
  const { stop } = supervised;
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (supervised.exitLine() !== undefined) throw new Error(`${name} exited (${supervised.exitLine()}) before it was ready; see its output above`);
    if (await ready(address)) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`${name} was not ready within ${READY_TIMEOUT_MS / 1_000} s`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return { pid: child.pid ?? 0, address, exited: supervised.exitedWith, stop };
}

/** The record service (services/record/dist/main.js) with `env` (DATABASE_URL, or none for PGlite; ROOM_ADDR); ready once GetRecordStatus answers. */
export async function startRecordProcess(name: string, env: NodeJS.ProcessEnv): Promise<RecordProcess> {
  let client: RecordClient | undefined;
  const started = await startServiceProcess(name, 'record', 'RECORD_GRPC_ADDR', { CURSOR_SECRET: randomBytes(32).toString('base64url'), ...env }, (address) => {
    client ??= recordClient(address);
    return client.call('getRecordStatus', {}).then(
      () => true,
      () => false,
    );
  });
  const ready = client ?? recordClient(started.address);
  return {
    ...started,
    client: ready,
    async stop() {
      ready.close();
      await started.stop();
    },
  };
}

/** The room service (services/room/dist/main.js), in-memory storage; ready once its gRPC health answers SERVING. */
export function startRoomProcess(name: string): Promise<ServiceProcess> {
  return startServiceProcess(name, 'room', 'ROOM_GRPC_ADDR', { CURSOR_SECRET: randomBytes(32).toString('base64url') }, async (address) => {
    const client = serviceClient(roomProto().RoomService, address);
    try {
      return (await client.check()) === 'SERVING';
    } finally {
      client.close();
    }
  });
}
