import { createServer } from 'node:net';

/** Below Linux's ephemeral range (32768-60999), from which every `listen(0)` and outgoing connection draws. */
const CHOSEN_PORTS = { from: 20_000, to: 32_000 };

/**
 * The ports `freePort` handed out in the last HANDED_OUT_MS, oldest first: each is free until its
 * process listens on it, so a second draw of it meanwhile (a test asking six at once for six
 * services) would make two of them collide. A minute covers any start-up; after it, a port may be
 * drawn again.
 */
const handedOut = new Map<number, number>();
const HANDED_OUT_MS = 60_000;
/** Ports this process will listen on that it did not draw (`reservePort`): never handed out. */
const reserved = new Set<number>();

/**
 * Tells `freePort` never to hand out `port`: this process was given it (a launcher's PORT, chosen
 * by whoever started it) and listens on it only after drawing ports for its other processes.
 */
export function reservePort(port: number): void {
  reserved.add(port);
}

function tryListen(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, host, () => server.close(() => resolve(true)));
  });
}

/**
 * A TCP port that is free on the loopback interface, for a process to listen on next. It is
 * picked at random below the OS's ephemeral range: a port the OS handed out by `listen(0)` and
 * took back could be handed at once to the next `listen(0)` or outgoing connection of any process
 * (a gRPC server on port 0, a client socket), and the listen that comes after would then fail.
 */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  const now = Date.now();
  for (const [port, at] of handedOut) {
    if (now - at < HANDED_OUT_MS) break;
    handedOut.delete(port);
  }
  for (let attempt = 0; attempt < 50; attempt += 1) {
    const port = CHOSEN_PORTS.from + Math.floor(Math.random() * (CHOSEN_PORTS.to - CHOSEN_PORTS.from));
    if (handedOut.has(port) || reserved.has(port)) continue;
    if (await tryListen(port, host)) {
      handedOut.set(port, Date.now());
      return port;
    }
  }
  throw new Error(`no free port between ${CHOSEN_PORTS.from} and ${CHOSEN_PORTS.to} after 50 tries`);
}
