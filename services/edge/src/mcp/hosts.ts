import type { PublicUrls } from '@agentroom/kit/config';

/** A host as it is compared: name, and port ('' when the scheme's default). */
interface HostKey {
  hostname: string;
  port: string;
}

const LOOPBACK = ['localhost', '127.0.0.1', '[::1]'];
const DEFAULT_PORTS = new Set(['', '80', '443']);
/** How many distinct Host headers `allowsHost` remembers before it starts over. */
const HOSTS_SEEN_KEPT = 256;

function keyOf(url: URL): HostKey {
  return { hostname: url.hostname.toLowerCase(), port: url.port };
}

function parseHost(host: string): HostKey | undefined {
  try {
    return keyOf(new URL(`http://${host}`));
  } catch {
    return undefined;
  }
}

function same(a: HostKey, b: HostKey): boolean {
  return a.hostname === b.hostname && (a.port === b.port || (DEFAULT_PORTS.has(a.port) && DEFAULT_PORTS.has(b.port)));
}

/**
 * The Host and Origin checks of the MCP transport (its DNS-rebinding rule), built from the
 * deployment's own addresses so they hold behind the gateway: a request must name `SITE_URL`'s or
 * `API_URL`'s host (a loopback deployment accepts its other loopback names on the same port), and a
 * browser's Origin must be one of those or of `MCP_ALLOWED_ORIGINS`.
 */
export class HostPolicy {
  private readonly hosts: HostKey[];
  private readonly anyOrigin: boolean;
  private readonly origins: Set<string>;
  /** Host headers already judged, and the verdict. */
  private readonly hostsSeen = new Map<string, boolean>();

  constructor(urls: PublicUrls, allowedOrigins: readonly string[]) {
    this.hosts = [];
    for (const address of [urls.siteUrl, urls.apiUrl]) {
      const key = keyOf(new URL(address));
      this.hosts.push(key);
      if (LOOPBACK.includes(key.hostname)) for (const hostname of LOOPBACK) this.hosts.push({ hostname, port: key.port });
    }
    this.anyOrigin = allowedOrigins.includes('*');
    this.origins = new Set(allowedOrigins.filter((origin) => origin !== '*').map((origin) => origin.toLowerCase()));
  }

  /** Whether a request's Host header names this deployment. */
  allowsHost(host: string | undefined): boolean {
    if (host === undefined) return false;
    // Clients send the same few Host headers again and again: each is parsed once (a URL per request was a visible cost).
    let allowed = this.hostsSeen.get(host);
    if (allowed === undefined) {
      const key = parseHost(host);
      allowed = key !== undefined && this.hosts.some((known) => same(known, key));
      if (this.hostsSeen.size >= HOSTS_SEEN_KEPT) this.hostsSeen.clear();
      this.hostsSeen.set(host, allowed);
    }
    return allowed;
  }

  /** Whether a browser Origin may call; requests without one (servers, CLIs) always may. */
  allowsOrigin(origin: string | undefined): boolean {
    if (origin === undefined || this.anyOrigin) return true;
    if (this.origins.has(origin.toLowerCase())) return true;
    let url: URL;
    try {
      url = new URL(origin);
    } catch {
      return false;
    }
    const key = keyOf(url);
    return this.hosts.some((allowed) => same(allowed, key));
  }
}
