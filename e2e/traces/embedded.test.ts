import { type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { freePort } from '@agentroom/kit/local';
import { approvedAgent, until } from '@agentroom/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { startEmbeddedProcess } from '../support/processes.js';
import { type Jaeger, startJaeger } from '../support/jaeger.js';

let child: ChildProcess | undefined;
let jaeger: Jaeger | undefined;

afterAll(async () => {
  if (child && child.exitCode === null) {
    const exited = new Promise((resolve) => child?.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }
  await jaeger?.stop();
});

/**
 * `npm start` (`node launcher/dist/start.js`): every service in one process, one SDK for it
 * (`service.name` agent-room), and the spans it holds sent when it stops on SIGTERM.
 */
describe('traces of npm start', () => {
  it('one SDK for the process: a post and its notification in one trace, sent at SIGTERM though the batch was not due', async () => {
    jaeger = await startJaeger();
    const port = await freePort();
    const { child: started, exited } = await startEmbeddedProcess({
      PORT: String(port),
      LOG_FORMAT: 'json',
      REDIS_URL: '',
      DATABASE_URL: '',
      DATA_DIR: '',
      OTEL_EXPORTER_OTLP_ENDPOINT: jaeger.otlpEndpoint,
      // No batch is due before the process stops: what Jaeger gets, it gets from the shutdown.
      OTEL_BSP_SCHEDULE_DELAY: '600000',
    });
    child = started;
    const origin = `http://127.0.0.1:${port}`;
    const writer = await approvedAgent(origin, ['posts:write'], 'writer');
    const listener = await approvedAgent(origin, ['messages:read'], 'listener');
    const traceId = randomBytes(16).toString('hex');
    const posted = await fetch(`${origin}/api/v1/posts`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${writer.token}`,
        'content-type': 'application/json',
        traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01`,
      },
      body: JSON.stringify({ text: `hello @${listener.agentId}` }),
    });
    expect(posted.status).toBe(201);
    await until('the notification', async () => {
      const answer = await fetch(`${origin}/api/v1/notifications`, { headers: { authorization: `Bearer ${listener.token}` } });
      return ((await answer.json()) as { data: unknown[] }).data.length === 1;
    });
    expect(await jaeger.trace(traceId)).toBeUndefined();

    started.kill('SIGTERM');
    expect(await exited).toBe(0);
    const trace = await jaeger.trace(traceId);
    // Found by its service as well.
    expect((await jaeger.traces('agent-room')).map((found) => found.traceId)).toContain(traceId);
    expect(new Set(trace?.spans.map((span) => span.service))).toEqual(new Set(['agent-room']));
    const names = new Set(trace?.spans.map((span) => span.name));
    for (const name of ['createPost', 'grpc.agentroom.room.v1.RoomService/CreatePost', 'notify post']) expect(names).toContain(name);
    const roomCall = trace?.spans.find(
      (span) =>
        span.name === 'grpc.agentroom.room.v1.RoomService/CreatePost' &&
        span.parentSpanId !== undefined &&
        trace.spans.some((parent) => parent.spanId === span.parentSpanId && parent.name.startsWith('grpc')),
    );
    const notify = trace?.spans.find((span) => span.name === 'notify post');
    expect(notify?.parentSpanId).toBe(roomCall?.spanId);
    expect(notify?.links.map((link) => link.spanId)).toEqual([roomCall?.spanId]);
  }, 120_000);
});
