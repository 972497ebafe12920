import { afterAll, describe, expect, it } from 'vitest';
import { GrpcServer, HealthChecker } from '../src/grpc/index.js';
import { createLogger } from '../src/log.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('GrpcServer.monitor', () => {
  const server = new GrpcServer('test', createLogger('test', 'silent'));
  let health: HealthChecker;
  afterAll(async () => {
    health.close();
    await server.shutdown(0);
  });

  it('reports NOT_SERVING while the dependency fails, re-checks it often, and SERVING again soon after it returns', async () => {
    const port = await server.listen('127.0.0.1:0');
    health = new HealthChecker(`127.0.0.1:${port}`);
    let up = true;
    let checks = 0;
    // Checked every 200 ms while it passes (5 s in production), every 20 ms while it fails (500 ms).
    server.monitor(
      () => {
        checks += 1;
        return up ? Promise.resolve() : Promise.reject(new Error('storage down'));
      },
      200,
      20,
    );
    expect(await health.check()).toBe('SERVING');
    up = false;
    await sleep(300);
    expect(await health.check()).toBe('NOT_SERVING');
    const whileDown = checks;
    await sleep(150);
    // More re-checks than the 200 ms interval alone would make.
    expect(checks).toBeGreaterThanOrEqual(whileDown + 3);
    up = true;
    await sleep(80);
    expect(await health.check()).toBe('SERVING');
  });
});
