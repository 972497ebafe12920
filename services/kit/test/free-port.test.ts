import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { freePort } from '../src/local/index.js';
import type * as ports from '../src/local/ports.js';

type FreePortModule = Pick<typeof ports, 'freePort' | 'reservePort'>;
/** The module of `freePort`, by path: imported again under a query, it is an instance of its own. */
const MODULE = new URL('../src/local/ports.ts', import.meta.url).pathname;

describe('freePort', () => {
  it('never hands out the same port twice while its owner may still be starting', async () => {
    // Tests ask for a port per service before starting any of them: drawn at random from 12,000
    // ports, 2,000 draws would repeat one about 160 times were drawn ports not remembered (a clean
    // clone's run once gave auth's gRPC and HTTP servers the same port).
    const ports: number[] = [];
    for (let i = 0; i < 2_000; i += 1) ports.push(await freePort());
    expect(new Set(ports).size).toBe(ports.length);
  });

  it('never hands out a port reserved for this process, such as the PORT a launcher was given', async () => {
    // A launcher is given PORT by whoever started it, draws ports for its other processes, and only
    // then listens on PORT: a clean-clone run once gave delivery's gRPC server the router's PORT.
    // Three instances of the module of their own (a query each: nothing handed out yet, and no other
    // import touched), each asked for 8,000 of its 12,000 ports: without the reservation, the given
    // port would be among them two times in three.
    for (const copy of [1, 2, 3]) {
      const fresh = (await import(/* @vite-ignore */ `${MODULE}?copy=${copy}`)) as FreePortModule;
      const given = 20_000 + Math.floor(Math.random() * 12_000);
      fresh.reservePort(given);
      const ports = new Set<number>();
      for (let i = 0; i < 8_000; i += 1) ports.add(await fresh.freePort());
      expect(ports.has(given), `port ${given}`).toBe(false);
    }
  }, 60_000);

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
