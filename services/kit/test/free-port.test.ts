import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { freePort } from '../src/index.js';

describe('freePort', () => {
  it('never hands out the same port twice while its owner may still be starting', async () => {
    // Tests ask for a port per service before starting any of them: drawn at random from 12,000
    // ports, 2,000 draws would repeat one about 160 times were drawn ports not remembered (a clean
    // clone's run once gave auth's gRPC and HTTP servers the same port).
    const ports: number[] = [];
    for (let i = 0; i < 2_000; i += 1) ports.push(await freePort());
    expect(new Set(ports).size).toBe(ports.length);
  });

  it('answers a port the caller can listen on', async () => {
    const port = await freePort();
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', resolve);
    });
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
});
