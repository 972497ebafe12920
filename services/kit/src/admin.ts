import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { processMetrics, registry } from './metrics.js';

/** One thing a process needs to do its work (its store, a peer service), checked by `/readyz`. */
export interface Dependency {
  name: string;
  /** Resolves when the dependency answers; rejects (or times out) when it does not. */
  check(): Promise<void>;
}

export interface Readiness {
  ready: boolean;
  status: 'ready' | 'not_ready' | 'draining';
  /** `ok`, or why that dependency failed. */
  checks: Record<string, string>;
}

const CHECK_TIMEOUT_MS = 1_000;

function withTimeout(check: Promise<void>, ms: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    timer.unref();
    check.then(
      () => {
        clearTimeout(timer);
        resolve();
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}

/**
 * What the orchestrator asks a process: is it alive (`/livez`: the event loop answers), and should
 * it get traffic (`/readyz`: every dependency answers and it is not shutting down). Readiness turns
 * false first on SIGTERM, so balancers stop sending before the listeners close.
 */
export class Probes {
  private draining = false;

  constructor(private readonly dependencies: readonly Dependency[] = []) {}

  /** From now on `/readyz` answers 503 `draining`; it never turns back. */
  drain(): void {
    this.draining = true;
  }

  get isDraining(): boolean {
    return this.draining;
  }

  async readiness(): Promise<Readiness> {
    const results = await Promise.all(
      this.dependencies.map(async (dependency): Promise<[string, string]> => {
        try {
          await withTimeout(dependency.check(), CHECK_TIMEOUT_MS);
          return [dependency.name, 'ok'];
        } catch (error) {
          return [dependency.name, error instanceof Error ? error.message : String(error)];
        }
      }),
    );
    const checks = Object.fromEntries(results);
    const healthy = results.every(([, result]) => result === 'ok');
    if (this.draining) return { ready: false, status: 'draining', checks };
    return { ready: healthy, status: healthy ? 'ready' : 'not_ready', checks };
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
}

/**
 * The admin port (`ADMIN_PORT`), away from the public routes: Prometheus `GET /metrics`, and the
 * probes `GET /livez` and `GET /readyz` (200 or 503, with each dependency's result in the body).
 */
export async function startAdminServer(port: number, host = '0.0.0.0', probes = new Probes()): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' }).end('GET /metrics, /livez or /readyz\n');
      return;
    }
    if (path === '/livez') {
      sendJson(res, 200, { status: 'live' });
      return;
    }
    if (path === '/readyz') {
      probes.readiness().then(
        (readiness) => sendJson(res, readiness.ready ? 200 : 503, { status: readiness.status, checks: readiness.checks }),
        () => sendJson(res, 503, { status: 'not_ready', checks: {} }),
      );
      return;
    }
    if (path === '/metrics') {
      processMetrics().then(
        (body) => {
          res.writeHead(200, { 'content-type': registry.contentType });
          res.end(body);
        },
        () => res.writeHead(500).end(),
      );
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('this port serves /metrics, /livez and /readyz\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return { server, port: (server.address() as AddressInfo).port };
}
