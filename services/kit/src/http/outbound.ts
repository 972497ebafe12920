import { promises as dns, type LookupAddress, type LookupOptions } from 'node:dns';
import http, { type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import https from 'node:https';
import ipaddr from 'ipaddr.js';

/** Why {@link fetchGuarded} refused a URL or gave up on it. */
export type OutboundRefusalReason = 'url' | 'scheme' | 'address' | 'dns' | 'redirect' | 'timeout' | 'too-large' | 'network';

/**
 * An outbound request that was refused or failed. The message is one sentence that names the URL's
 * host, never a resolved private address (a stranger's URL must not learn our network through it).
 */
export class OutboundRefusal extends Error {
  override readonly name = 'OutboundRefusal';
  readonly reason: OutboundRefusalReason;

  constructor(reason: OutboundRefusalReason, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.reason = reason;
  }
}

/** Which addresses and schemes an outbound request may reach; the default is public https only. */
export interface OutboundPolicy {
  /** Allow loopback addresses (127.0.0.0/8, ::1), e.g. for tests; default false. */
  allowLoopback?: boolean;
  /** Allow every non-public address (private, link-local, unique-local, CGNAT, ...); default false. Implies allowLoopback. */
  allowPrivate?: boolean;
  /** Allow http: as well as https:; default false (https only). */
  allowHttp?: boolean;
}

/** One resolved address of a host name. */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** What to send, and the limits of the exchange. */
export interface OutboundRequest {
  /** Default GET. */
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** The whole exchange, DNS included: past it the request is refused with 'timeout'. */
  timeoutMs: number;
  /** A body larger than this is refused with 'too-large', and the connection closed. */
  maxBytes: number;
  /** Default true; false: ignore the answer's body (webhooks) and resolve on its headers. */
  readBody?: boolean;
  /** DNS resolution, injectable for tests; default node:dns lookup with { all: true }. */
  lookup?: (hostname: string) => Promise<ResolvedAddress[]>;
}

/** A non-redirect answer. `body` is empty when `readBody` is false. */
export interface OutboundResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

type Cidr<T> = [T, number];

// Non-public blocks that ipaddr.js may class as 'unicast' (its range table is not the whole IANA special-purpose registry).
const EXTRA_NON_PUBLIC_V4: Cidr<ipaddr.IPv4>[] = [
  ipaddr.IPv4.parseCIDR('198.18.0.0/15'), // benchmarking (RFC 2544), not on the internet
];
const EXTRA_NON_PUBLIC_V6: Cidr<ipaddr.IPv6>[] = [
  ipaddr.IPv6.parseCIDR('::/96'), // IPv4-compatible (deprecated): embeds an IPv4 address
  ipaddr.IPv6.parseCIDR('64:ff9b:1::/48'), // local-use NAT64 (RFC 8215): reaches private IPv4 through a translator
  ipaddr.IPv6.parseCIDR('100::/64'), // discard-only (RFC 6666)
  ipaddr.IPv6.parseCIDR('2001::/23'), // IETF protocol assignments (RFC 2928), not ordinary hosts
  ipaddr.IPv6.parseCIDR('fec0::/10'), // site-local (deprecated), private in practice
];

/** The address as ipaddr.js sees it, IPv4-mapped IPv6 as IPv4; undefined when it is not an IP address in canonical form. */
function parseAddress(address: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  // Only dotted-quad IPv4: ipaddr.js would also read octal and hex forms, which a socket would not.
  if (ipaddr.IPv4.isValidFourPartDecimal(address)) return ipaddr.IPv4.parse(address);
  if (!address.includes(':') || !ipaddr.IPv6.isValid(address)) return undefined;
  const v6 = ipaddr.IPv6.parse(address);
  return v6.isIPv4MappedAddress() ? v6.toIPv4Address() : v6;
}

/** Whether an IP address (v4, v6, v4-mapped v6) may be reached under the policy: public unicast only by default. */
export function addressAllowed(address: string, policy: OutboundPolicy = {}): boolean {
  const parsed = parseAddress(address);
  if (parsed === undefined) return false;
  if (policy.allowPrivate === true) return true;
  const range = parsed.range();
  if (range === 'loopback') return policy.allowLoopback === true;
  if (range !== 'unicast') return false;
  if (parsed instanceof ipaddr.IPv4) return !EXTRA_NON_PUBLIC_V4.some((cidr) => parsed.match(cidr));
  return !EXTRA_NON_PUBLIC_V6.some((cidr) => parsed.match(cidr));
}

interface Target {
  url: URL;
  /** The host name or IP literal, without the brackets of an IPv6 literal. */
  hostname: string;
  /** host[:port] as the URL wrote it, for messages. */
  host: string;
  /** The IP address the URL names, if it names one rather than a host name. */
  literal: string | undefined;
}

function parseTarget(raw: string, policy: OutboundPolicy): Target {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new OutboundRefusal('url', 'Refused an outbound request: the URL is not a valid absolute URL.');
  }
  const host = url.host;
  if (url.username !== '' || url.password !== '') {
    throw new OutboundRefusal('url', `Refused an outbound request to ${host}: the URL carries credentials.`);
  }
  const schemes = policy.allowHttp === true ? ['https:', 'http:'] : ['https:'];
  if (!schemes.includes(url.protocol)) {
    throw new OutboundRefusal(
      'scheme',
      `Refused an outbound request to ${host || 'the URL'}: only ${schemes.join(' and ')} URLs are allowed, not ${url.protocol}.`,
    );
  }
  if (url.hostname === '') throw new OutboundRefusal('url', 'Refused an outbound request: the URL has no host.');
  const bracketed = url.hostname.startsWith('[') && url.hostname.endsWith(']');
  const hostname = bracketed ? url.hostname.slice(1, -1) : url.hostname;
  // WHATWG URL has already turned decimal, octal and hex IPv4 forms into dotted quads.
  const literal = bracketed || ipaddr.IPv4.isValidFourPartDecimal(hostname) ? hostname : undefined;
  return { url, hostname, host, literal };
}

async function systemLookup(hostname: string): Promise<ResolvedAddress[]> {
  const answers = await dns.lookup(hostname, { all: true, verbatim: true });
  return answers.map((answer) => ({ address: answer.address, family: answer.family === 6 ? 6 : 4 }));
}

/** The addresses to connect to, every one of them checked against the policy before any connection. */
async function resolveChecked(target: Target, request: OutboundRequest, policy: OutboundPolicy): Promise<ResolvedAddress[]> {
  if (target.literal !== undefined) {
    if (!addressAllowed(target.literal, policy)) {
      throw new OutboundRefusal('address', `Refused an outbound request to ${target.host}: it is a private address.`);
    }
    return [{ address: target.literal, family: target.literal.includes(':') ? 6 : 4 }];
  }
  let answers: ResolvedAddress[];
  try {
    answers = await (request.lookup ?? systemLookup)(target.hostname);
  } catch (error) {
    throw new OutboundRefusal('dns', `Could not resolve ${target.host}.`, { cause: error });
  }
  if (answers.length === 0) throw new OutboundRefusal('dns', `Could not resolve ${target.host}: it has no address.`);
  // One private answer is enough to refuse: the name's owner chooses which answer we would use.
  if (!answers.every((answer) => addressAllowed(answer.address, policy))) {
    throw new OutboundRefusal('address', `Refused an outbound request to ${target.host}: it resolves to a private address.`);
  }
  // The family is taken from the address itself, not from what the resolver said.
  return answers.map((answer) => ({ address: answer.address, family: answer.address.includes(':') ? 6 : 4 }));
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** A socket lookup that answers only the already-checked addresses, so a second DNS answer (rebinding) is never used. */
function pinnedLookup(addresses: ResolvedAddress[]): (hostname: string, options: LookupOptions, callback: LookupCallback) => void {
  return (_hostname, options, callback) => {
    const wanted = options.family === 4 || options.family === 6 ? addresses.filter((a) => a.family === options.family) : addresses;
    const candidates = wanted.length > 0 ? wanted : addresses;
    if (options.all === true) {
      callback(
        null,
        candidates.map((a) => ({ address: a.address, family: a.family })),
      );
    } else {
      const first = candidates[0] as ResolvedAddress;
      callback(null, first.address, first.family);
    }
  };
}

// 304 answers a conditional request and moves nothing; the others point elsewhere.
function isRedirect(status: number): boolean {
  return status >= 300 && status < 400 && status !== 304;
}

/** The error's code (ECONNREFUSED, CERT_HAS_EXPIRED, ...): Node's messages name the address, which must not leak. */
function errorCode(error: unknown): string {
  const code = typeof error === 'object' && error !== null && 'code' in error ? (error as { code: unknown }).code : undefined;
  return typeof code === 'string' ? code : 'a connection error';
}

function exchange(target: Target, addresses: ResolvedAddress[], request: OutboundRequest, signal: AbortSignal): Promise<OutboundResponse> {
  return new Promise<OutboundResponse>((resolve, reject) => {
    const { url, host } = target;
    const network = (error: unknown): OutboundRefusal =>
      new OutboundRefusal('network', `Could not complete the request to ${host}: ${errorCode(error)}.`, { cause: error });
    const headers: OutgoingHttpHeaders = { ...request.headers };
    const hasLength = Object.keys(headers).some((name) => name.toLowerCase() === 'content-length');
    if (request.body !== undefined && !hasLength) headers['content-length'] = Buffer.byteLength(request.body);

    const client = url.protocol === 'https:' ? https : http;
    const req = client.request({
      protocol: url.protocol,
      // The name, not the address, so that TLS SNI, the certificate check and the Host header use it.
      hostname: target.hostname,
      port: url.port === '' ? undefined : Number(url.port),
      path: `${url.pathname}${url.search}`,
      method: request.method ?? 'GET',
      headers,
      lookup: pinnedLookup(addresses),
      // A fresh connection each time: a pooled socket would outlive its address check and the limits.
      agent: false,
      signal,
    });

    req.on('error', (error) => reject(network(error)));
    req.on('response', (res: IncomingMessage) => {
      const status = res.statusCode ?? 0;
      if (isRedirect(status)) {
        res.destroy();
        reject(new OutboundRefusal('redirect', `${host} answered ${status}, a redirect, and redirects are not followed.`));
        return;
      }
      if (request.readBody === false) {
        res.destroy();
        resolve({ status, headers: res.headers, body: Buffer.alloc(0) });
        return;
      }
      const tooLarge = (): OutboundRefusal => new OutboundRefusal('too-large', `The answer from ${host} is larger than ${request.maxBytes} bytes.`);
      const declared = Number(res.headers['content-length']);
      if (Number.isFinite(declared) && declared > request.maxBytes) {
        res.destroy();
        reject(tooLarge());
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      let ended = false;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > request.maxBytes) {
          res.destroy();
          reject(tooLarge());
          return;
        }
        chunks.push(chunk);
      });
      res.on('end', () => {
        ended = true;
        resolve({ status, headers: res.headers, body: Buffer.concat(chunks, size) });
      });
      res.on('error', (error) => reject(network(error)));
      // A connection closed mid-body, without an error of its own.
      res.on('close', () => {
        if (!ended) reject(network(new Error('the connection closed before the end of the answer')));
      });
    });
    req.end(request.body);
  });
}

/**
 * Fetches a URL a stranger gave us without letting it reach our own network (SSRF): https only
 * (unless `allowHttp`), no credentials in the URL, every resolved address public (unless the policy
 * allows loopback or private ones), the connection pinned to the checked address (no DNS
 * rebinding), no redirects followed, and the whole exchange bounded in time and size.
 *
 * @throws {OutboundRefusal} on any refusal or failure; its `reason` says which.
 */
export async function fetchGuarded(url: string, request: OutboundRequest, policy: OutboundPolicy = {}): Promise<OutboundResponse> {
  const target = parseTarget(url, policy);
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      controller.abort();
      reject(new OutboundRefusal('timeout', `${target.host} did not answer within ${request.timeoutMs} ms.`));
    }, request.timeoutMs);
  });
  const attempt = async (): Promise<OutboundResponse> => {
    const addresses = await resolveChecked(target, request, policy);
    // A lookup that outlived the deadline must not start a connection.
    if (controller.signal.aborted) throw new OutboundRefusal('timeout', `${target.host} did not answer within ${request.timeoutMs} ms.`);
    return exchange(target, addresses, request, controller.signal);
  };
  try {
    return await Promise.race([attempt(), deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Checks a URL as {@link fetchGuarded} would before connecting (scheme, credentials, every resolved
 * address under the policy), without connecting: for URLs registered now and fetched later
 * (webhooks). `lookup` as in {@link OutboundRequest}.
 *
 * @throws {OutboundRefusal} with reason 'url', 'scheme', 'address' or 'dns'.
 */
export async function checkOutboundTarget(url: string, policy: OutboundPolicy = {}, lookup?: OutboundRequest['lookup']): Promise<void> {
  const target = parseTarget(url, policy);
  await resolveChecked(target, { timeoutMs: 0, maxBytes: 0, ...(lookup ? { lookup } : {}) }, policy);
}
