import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeHttpServer, Probes, startAdminServer } from '../src/process/index.js';

describe('the admin port: /livez, /readyz and /metrics', () => {
  let storeUp = true;
  let hang = false;
  const probes = new Probes([
    { name: 'redis', check: () => (storeUp ? Promise.resolve() : Promise.reject(new Error('connection refused'))) },
    { name: 'room', check: () => (hang ? new Promise<void>(() => undefined) : Promise.resolve()) },
  ]);
  let base: string;
  let close: () => Promise<void>;

  beforeAll(async () => {
    const admin = await startAdminServer(0, '127.0.0.1', probes);
    base = `http://127.0.0.1:${admin.port}`;
    close = () => closeHttpServer(admin.server, 1_000);
  });
  afterAll(() => close());

  const readyz = async (): Promise<{ status: number; body: unknown }> => {
    const response = await fetch(`${base}/readyz`);
    return { status: response.status, body: await response.json() };
  };

  it('is ready while every dependency answers, and says which one does not', async () => {
    expect(await readyz()).toEqual({ status: 200, body: { status: 'ready', checks: { redis: 'ok', room: 'ok' } } });
    storeUp = false;
    expect(await readyz()).toEqual({ status: 503, body: { status: 'not_ready', checks: { redis: 'connection refused', room: 'ok' } } });
    storeUp = true;
    expect((await readyz()).status).toBe(200);
  });

  it('answers not ready, rather than hanging, when a dependency does not answer', async () => {
    hang = true;
    const answer = await readyz();
    hang = false;
    expect(answer).toEqual({ status: 503, body: { status: 'not_ready', checks: { redis: 'ok', room: 'no answer within 1000 ms' } } });
  });

  it('stays alive but not ready once draining, for good', async () => {
    probes.drain();
    expect(await readyz()).toEqual({ status: 503, body: { status: 'draining', checks: { redis: 'ok', room: 'ok' } } });
    const livez = await fetch(`${base}/livez`);
    expect(livez.status).toBe(200);
    expect(await livez.json()).toEqual({ status: 'live' });
  });

  it('serves Prometheus metrics, and nothing else', async () => {
    const metrics = await fetch(`${base}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('process_cpu_user_seconds_total');
    expect((await fetch(`${base}/`)).status).toBe(404);
    expect((await fetch(`${base}/readyz`, { method: 'POST' })).status).toBe(405);
  });
});
