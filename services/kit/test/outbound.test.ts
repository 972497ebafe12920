import { once } from 'node:events';
import http, { type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { addressAllowed, fetchGuarded, OutboundRefusal, type OutboundPolicy, type OutboundRequest, type ResolvedAddress } from '../src/http/index.js';

/** The policy of the positive cases: plain http to our own loopback servers. */
const LOCAL: OutboundPolicy = { allowLoopback: true, allowHttp: true };
const LIMITS: OutboundRequest = { timeoutMs: 2_000, maxBytes: 1_000 };

/** The refusal a promise rejects with; fails the test if it resolves or rejects with anything else. */
async function refusal(promise: Promise<unknown>): Promise<OutboundRefusal> {
  const error: unknown = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(OutboundRefusal);
  return error as OutboundRefusal;
}

/** A lookup that answers fixed addresses, one list per call (the last one repeats), and records its calls. */
function fakeLookup(...answers: string[][]): { lookup: (hostname: string) => Promise<ResolvedAddress[]>; calls: string[] } {
  const calls: string[] = [];
  const lookup = (hostname: string): Promise<ResolvedAddress[]> => {
    calls.push(hostname);
    const answer = answers[Math.min(calls.length, answers.length) - 1] ?? [];
    return Promise.resolve(answer.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })));
  };
  return { lookup, calls };
}

async function listen(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ server: Server; port: number }> {
  const server = http.createServer(handler);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, port: (server.address() as AddressInfo).port };
}

async function close(server: Server): Promise<void> {
  server.closeAllConnections();
  server.close();
  await once(server, 'close');
}

describe('fetchGuarded against local servers', () => {
  let base: string;
  let port: number;
  let server: Server;
  let target: Server;
  let targetPort: number;
  let targetHits = 0;

  beforeAll(async () => {
    ({ server: target, port: targetPort } = await listen((_req, res) => {
      targetHits += 1;
      res.end('you should not be here');
    }));
    ({ server, port } = await listen((req, res) => {
      const path = req.url ?? '/';
      if (path === '/json') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ client_id: 'https://app.example/meta' }));
      } else if (path === '/echo') {
        const chunks: Buffer[] = [];
        req.on('data', (chunk: Buffer) => chunks.push(chunk));
        req.on('end', () => {
          const echo = { method: req.method, host: req.headers.host, length: req.headers['content-length'], body: Buffer.concat(chunks).toString() };
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(echo));
        });
      } else if (path === '/big-declared') {
        res.writeHead(200, { 'content-length': '5000' }).end('x'.repeat(5_000));
      } else if (path === '/big-streamed') {
        // No content-length: the limit must hold while reading.
        res.writeHead(200);
        res.write('x'.repeat(600));
        setTimeout(() => res.end('y'.repeat(600)), 20);
      } else if (path === '/slow') {
        const timer = setTimeout(() => res.end('late'), 2_000);
        res.on('close', () => clearTimeout(timer));
      } else if (path === '/stall-body') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('a first part, and then nothing');
      } else if (path === '/redirect') {
        res.writeHead(302, { location: `http://127.0.0.1:${targetPort}/target` }).end();
      } else if (path === '/webhook') {
        // Headers, then a body that never ends: a webhook delivery must not wait for it.
        res.writeHead(202, { 'x-delivery': 'accepted' });
        res.write('still writing');
      } else {
        res.writeHead(404).end();
      }
    }));
    base = `http://127.0.0.1:${port}`;
  });
  afterAll(async () => {
    await close(server);
    await close(target);
  });

  it('reads a 200 JSON answer', async () => {
    const response = await fetchGuarded(`${base}/json`, LIMITS, LOCAL);
    expect(response.status).toBe(200);
    expect(response.headers['content-type']).toBe('application/json');
    expect(JSON.parse(response.body.toString('utf8'))).toEqual({ client_id: 'https://app.example/meta' });
  });

  it('sends a POST body with its length', async () => {
    const response = await fetchGuarded(
      `${base}/echo`,
      { ...LIMITS, method: 'POST', body: '{"event":"post.created"}', headers: { 'content-type': 'application/json' } },
      LOCAL,
    );
    expect(JSON.parse(response.body.toString('utf8'))).toEqual({ method: 'POST', host: `127.0.0.1:${port}`, length: '24', body: '{"event":"post.created"}' });
  });

  it('connects to the checked address only, and keeps the name for the Host header (no DNS rebinding)', async () => {
    // A second lookup would answer a private address: it must never be asked.
    const dns = fakeLookup(['127.0.0.1'], ['10.0.0.1']);
    const response = await fetchGuarded(`http://rebind.test:${port}/echo`, { ...LIMITS, lookup: dns.lookup }, LOCAL);
    expect(response.status).toBe(200);
    expect(JSON.parse(response.body.toString('utf8'))).toMatchObject({ method: 'GET', host: `rebind.test:${port}` });
    expect(dns.calls).toEqual(['rebind.test']);
  });

  it('refuses a body over maxBytes, declared or streamed', async () => {
    const declared = await refusal(fetchGuarded(`${base}/big-declared`, LIMITS, LOCAL));
    expect(declared.reason).toBe('too-large');
    expect(declared.message).toBe(`The answer from 127.0.0.1:${port} is larger than 1000 bytes.`);
    expect((await refusal(fetchGuarded(`${base}/big-streamed`, LIMITS, LOCAL))).reason).toBe('too-large');
    // Exactly maxBytes is fine.
    expect((await fetchGuarded(`${base}/big-declared`, { ...LIMITS, maxBytes: 5_000 }, LOCAL)).body.length).toBe(5_000);
  });

  it('gives up on a server slower than timeoutMs, waiting for headers or for the body', async () => {
    const started = Date.now();
    const slow = await refusal(fetchGuarded(`${base}/slow`, { ...LIMITS, timeoutMs: 300 }, LOCAL));
    expect(slow.reason).toBe('timeout');
    expect(slow.message).toBe(`127.0.0.1:${port} did not answer within 300 ms.`);
    expect(Date.now() - started).toBeLessThan(1_500);
    expect((await refusal(fetchGuarded(`${base}/stall-body`, { ...LIMITS, timeoutMs: 300 }, LOCAL))).reason).toBe('timeout');
  });

  it('counts DNS in the timeout, and connects nowhere after it', async () => {
    let answer: (addresses: ResolvedAddress[]) => void = () => undefined;
    const lookup = (): Promise<ResolvedAddress[]> => new Promise((resolve) => (answer = resolve));
    const refused = await refusal(fetchGuarded(`http://slow-dns.test:${port}/json`, { ...LIMITS, timeoutMs: 300, lookup }, LOCAL));
    expect(refused.reason).toBe('timeout');
    const connect = vi.spyOn(net.Socket.prototype, 'connect');
    try {
      answer([{ address: '127.0.0.1', family: 4 }]);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(connect).not.toHaveBeenCalled();
    } finally {
      connect.mockRestore();
    }
  });

  it('refuses a redirect and never follows it', async () => {
    const refused = await refusal(fetchGuarded(`${base}/redirect`, LIMITS, LOCAL));
    expect(refused.reason).toBe('redirect');
    expect(refused.message).toBe(`127.0.0.1:${port} answered 302, a redirect, and redirects are not followed.`);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(targetHits).toBe(0);
  });

  it('resolves on the headers when readBody is false', async () => {
    const response = await fetchGuarded(`${base}/webhook`, { ...LIMITS, method: 'POST', body: '{}', readBody: false }, LOCAL);
    expect(response.status).toBe(202);
    expect(response.headers['x-delivery']).toBe('accepted');
    expect(response.body.length).toBe(0);
  });

  it('reports a refused connection as a network error, without the address it connected to', async () => {
    const { server: closed, port: closedPort } = await listen(() => undefined);
    await close(closed);
    const refused = await refusal(fetchGuarded(`http://down.test:${closedPort}/`, { ...LIMITS, lookup: fakeLookup(['127.0.0.1']).lookup }, LOCAL));
    expect(refused.reason).toBe('network');
    expect(refused.message).toBe(`Could not complete the request to down.test:${closedPort}: ECONNREFUSED.`);
  });

  it('reports a TLS failure as a network error', async () => {
    // https to a plain http server: the handshake fails.
    const refused = await refusal(fetchGuarded(`https://127.0.0.1:${port}/json`, LIMITS, { allowLoopback: true }));
    expect(refused.reason).toBe('network');
  });
});

describe('fetchGuarded refusals, before any connection', () => {
  let connect: ReturnType<typeof vi.spyOn>;

  beforeAll(() => {
    // Belt and braces: a bug here must not send a packet to a non-loopback address.
    connect = vi.spyOn(net.Socket.prototype, 'connect').mockImplementation(() => {
      throw new Error('the test tried to connect');
    });
  });
  afterEach(() => {
    expect(connect).not.toHaveBeenCalled();
  });
  afterAll(() => {
    connect.mockRestore();
  });

  it.each([
    ['http://example.com/x', 'scheme'],
    ['ftp://example.com/x', 'scheme'],
    ['http://127.0.0.1/', 'scheme'],
    ['https://user:pw@example.com/', 'url'],
    ['https://user@example.com/', 'url'],
    ['not a url', 'url'],
    ['/relative/path', 'url'],
    ['https://127.0.0.1/', 'address'],
    ['https://127.0.0.1:8443/metrics', 'address'],
    ['https://[::1]/', 'address'],
    ['https://[::ffff:127.0.0.1]/', 'address'],
    ['https://[::127.0.0.1]/', 'address'],
    ['https://2130706433/', 'address'],
    ['https://0x7f.1/', 'address'],
    ['https://0177.0.0.1/', 'address'],
    ['https://10.0.0.1/', 'address'],
    ['https://172.16.5.4/', 'address'],
    ['https://192.168.1.1/', 'address'],
    ['https://100.64.0.1/', 'address'],
    ['https://0.0.0.0/', 'address'],
    ['https://169.254.169.254/latest/meta-data', 'address'],
    ['https://[fd00:ec2::254]/', 'address'],
    ['https://[fe80::1]/', 'address'],
    ['https://[64:ff9b::a00:1]/', 'address'],
  ] as const)('%s: %s', async (url, reason) => {
    const dns = fakeLookup(['93.184.216.34']);
    const refused = await refusal(fetchGuarded(url, { ...LIMITS, lookup: dns.lookup }));
    expect(refused.reason).toBe(reason);
    // Literals are checked as they are, and refused URLs are not resolved at all.
    expect(dns.calls).toEqual([]);
  });

  it('refuses localhost, which resolves to loopback', async () => {
    const refused = await refusal(fetchGuarded('https://localhost/', LIMITS));
    expect(refused.reason).toBe('address');
    expect(refused.message).toBe('Refused an outbound request to localhost: it resolves to a private address.');
  });

  it('refuses a name that resolves to a private address, without naming the address', async () => {
    const dns = fakeLookup(['10.1.2.3']);
    const refused = await refusal(fetchGuarded('https://internal.example/meta', { ...LIMITS, lookup: dns.lookup }));
    expect(refused.reason).toBe('address');
    expect(refused.message).toBe('Refused an outbound request to internal.example: it resolves to a private address.');
    expect(refused.message).not.toContain('10.1.2.3');
    expect(dns.calls).toEqual(['internal.example']);
  });

  it('refuses a name when any one of its addresses is private', async () => {
    const dns = fakeLookup(['93.184.216.34', '192.168.0.7']);
    expect((await refusal(fetchGuarded('https://mixed.example/', { ...LIMITS, lookup: dns.lookup }))).reason).toBe('address');
    const v6 = fakeLookup(['2606:4700::1', 'fd00:ec2::254']);
    expect((await refusal(fetchGuarded('https://mixed6.example/', { ...LIMITS, lookup: v6.lookup }))).reason).toBe('address');
  });

  it('refuses a lookup answer that is not a plain IP address', async () => {
    const dns = fakeLookup(['0177.0.0.1']);
    expect((await refusal(fetchGuarded('https://odd.example/', { ...LIMITS, lookup: dns.lookup }))).reason).toBe('address');
  });

  it('still refuses private addresses when only loopback is allowed', async () => {
    const dns = fakeLookup(['10.1.2.3']);
    expect((await refusal(fetchGuarded('http://internal.example/', { ...LIMITS, lookup: dns.lookup }, LOCAL))).reason).toBe('address');
    expect((await refusal(fetchGuarded('http://169.254.169.254/', LIMITS, LOCAL))).reason).toBe('address');
  });

  it('says dns when the name does not resolve, or resolves to nothing', async () => {
    const failing = (): Promise<ResolvedAddress[]> => Promise.reject(Object.assign(new Error('getaddrinfo ENOTFOUND nowhere.example'), { code: 'ENOTFOUND' }));
    const refused = await refusal(fetchGuarded('https://nowhere.example/', { ...LIMITS, lookup: failing }));
    expect(refused.reason).toBe('dns');
    expect(refused.message).toBe('Could not resolve nowhere.example.');
    expect((await refusal(fetchGuarded('https://empty.example/', { ...LIMITS, lookup: fakeLookup([]).lookup }))).reason).toBe('dns');
  });
});

describe('addressAllowed', () => {
  const PUBLIC = ['93.184.216.34', '8.8.8.8', '2606:4700::1', '2a00:1450:4001:80b::200e', '::ffff:93.184.216.34'];
  const LOOPBACK = ['127.0.0.1', '127.1.2.3', '::1', '::ffff:127.0.0.1'];
  const PRIVATE = [
    '10.0.0.1',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '100.64.0.1', // CGNAT
    '169.254.169.254', // cloud metadata, link-local
    '169.254.1.1',
    'fe80::1',
    'fd00:ec2::254', // AWS metadata over IPv6, unique-local
    'fc00::1',
    '::ffff:10.0.0.1',
    '::ffff:169.254.169.254',
    '224.0.0.1', // multicast
    'ff02::1',
    '0.0.0.0',
    '::',
    '255.255.255.255',
    '192.0.2.1', // documentation
    '240.0.0.1', // reserved
    '198.18.0.1', // benchmarking
    '64:ff9b::a00:1', // NAT64 of 10.0.0.1
    '64:ff9b:1::1', // local-use NAT64
    '2002:a00:1::1', // 6to4 of 10.0.0.1
    '2001::1', // Teredo
    '2001:db8::1', // documentation
    '::7f00:1', // IPv4-compatible 127.0.0.1
    'fec0::1', // site-local
  ];
  const NOT_ADDRESSES = ['localhost', '', 'not an ip', '0177.0.0.1', '127.1', '0x7f000001', '2130706433', '[::1]', '10.0.0.1/8'];

  it.each(PUBLIC)('allows the public %s by default', (address) => {
    expect(addressAllowed(address)).toBe(true);
  });

  it.each([...LOOPBACK, ...PRIVATE, ...NOT_ADDRESSES])('refuses %s by default', (address) => {
    expect(addressAllowed(address)).toBe(false);
  });

  it.each(LOOPBACK)('allows the loopback %s with allowLoopback', (address) => {
    expect(addressAllowed(address, { allowLoopback: true })).toBe(true);
  });

  it.each(PRIVATE)('still refuses %s with allowLoopback alone', (address) => {
    expect(addressAllowed(address, { allowLoopback: true })).toBe(false);
  });

  it.each([...LOOPBACK, ...PRIVATE, ...PUBLIC])('allows %s with allowPrivate', (address) => {
    expect(addressAllowed(address, { allowPrivate: true })).toBe(true);
  });

  it.each(NOT_ADDRESSES)('never allows %s, which is not an IP address', (address) => {
    expect(addressAllowed(address, { allowPrivate: true })).toBe(false);
  });
});
