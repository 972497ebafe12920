// The servers the rows load, each in its own process and started on first use: the product in
// embedded mode and as the cluster (both seeded with the same posts), and the two baselines
// replaying the product's first page.
import { EMBEDDED_NODE_FLAGS } from '@agentroom/kit/local';
import { type CapturedResponse, capture, cannedEnv } from './canned.js';
import { type ServerChild, startServerChild } from './children.js';
import { page, SEEDED_POSTS } from './pages.js';
import { progress } from './progress.js';
import { seedRoom } from './seed.js';

const OTLP_RECEIVER = 'otlp-receiver';

/** Starting the cluster takes a few seconds, more on a busy machine; a hung child must not hang us. */
const READY_TIMEOUT_MS = 60_000;

export class Servers {
  private readonly children: ServerChild[] = [];
  private readonly started = new Map<string, Promise<ServerChild>>();

  /** The whole product in one process, memory storage. */
  embedded(): Promise<ServerChild> {
    return this.once('embedded', () => this.product('embedded', './embedded-server.js', 'the product in embedded mode', {}, EMBEDDED_NODE_FLAGS));
  }

  /** Another embedded product of its own, seeded alike, for a row that must compare two servers' states side by side. */
  embeddedOfItsOwn(name: string): Promise<ServerChild> {
    return this.once(name, () => this.product(name, './embedded-server.js', `another embedded product (${name})`, {}, EMBEDDED_NODE_FLAGS));
  }

  /** `npm run cluster`: room, record, messaging, delivery, auth, one edge, the router, a redis-server and a postgres, each its own process. */
  cluster(): Promise<ServerChild> {
    return this.once('cluster', () =>
      this.product('cluster', './cluster-server.js', 'npm run cluster (room, record, messaging, delivery, auth, edge, router, redis-server, postgres)'),
    );
  }

  /** `npm run cluster -- --envoy`: the same processes with the real Envoy in front in place of the router, as deployed. */
  clusterBehindEnvoy(): Promise<ServerChild> {
    return this.once('cluster-envoy', () =>
      this.product(
        'cluster-envoy',
        './cluster-server.js',
        'npm run cluster -- --envoy (room, record, messaging, delivery, auth, edge, Envoy, redis-server, postgres)',
        {
          BENCH_CLUSTER_FRONT: 'envoy',
        },
      ),
    );
  }

  /**
   * The same cluster behind Envoy with tracing on: every process and Envoy export spans over OTLP/HTTP
   * to the bench's receiver (otlp-sink.ts), `ratio` of requests sampled (OTEL_TRACES_SAMPLER
   * `parentbased_traceidratio`, Envoy's random sampling at the same share), as the chart sets them.
   */
  clusterBehindEnvoyTraced(ratio: number): Promise<ServerChild> {
    return this.once(`cluster-envoy-traced-${ratio}`, async () => {
      const receiver = await this.otlpReceiver(ratio);
      return this.product(
        `cluster-envoy-traced-${ratio}`,
        './cluster-server.js',
        `npm run cluster -- --envoy with tracing at ${ratio * 100} % to the bench's OTLP receiver`,
        {
          BENCH_CLUSTER_FRONT: 'envoy',
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.origin,
          OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
          OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
          OTEL_TRACES_SAMPLER_ARG: String(ratio),
        },
      );
    });
  }

  /** The OTLP/HTTP receiver the cluster traced at `ratio` sends its spans to (one each): answers, counts, keeps nothing. */
  otlpReceiver(ratio: number): Promise<ServerChild> {
    const name = `${OTLP_RECEIVER}-${ratio}`;
    return this.once(name, () => {
      progress(`starting the bench's OTLP receiver for tracing at ${ratio * 100} %…`);
      return this.start(name, './otlp-sink.js', withoutTracing(process.env));
    });
  }

  /** A bare node:http server answering every request with the embedded product's first page of posts. */
  bare(): Promise<ServerChild> {
    return this.once('bare', () => this.baseline('bare', './bare-server.js'));
  }

  /** An empty Express 5 app answering every request with the same bytes. */
  express(): Promise<ServerChild> {
    return this.once('express', () => this.baseline('express', './express-server.js'));
  }

  /** A child that has exited is a problem of the run: say which, and how. */
  exited(): string[] {
    return this.children.flatMap((child) => {
      const exited = child.exited();
      return exited === undefined ? [] : [`${child.name} exited during the run (${exited})`];
    });
  }

  /** Every child, the OTLP receiver last: the traced clusters send their last spans to it as they stop. */
  async stop(): Promise<void> {
    const last = (child: ServerChild): boolean => child.name.startsWith(OTLP_RECEIVER);
    await Promise.all(this.children.filter((child) => !last(child)).map((child) => child.stop()));
    await Promise.all(this.children.filter(last).map((child) => child.stop()));
  }

  private once(name: string, start: () => Promise<ServerChild>): Promise<ServerChild> {
    let server = this.started.get(name);
    if (server === undefined) {
      server = start();
      this.started.set(name, server);
    }
    return server;
  }

  private async start(name: string, script: string, env: NodeJS.ProcessEnv, flags?: readonly string[]): Promise<ServerChild> {
    const child = await startServerChild(name, script, env, READY_TIMEOUT_MS, flags);
    this.children.push(child);
    return child;
  }

  /** A product: embedded ones with `npm start`'s flags, as users run it; the cluster's launcher with a service's. */
  private async product(name: string, script: string, what: string, env: NodeJS.ProcessEnv = {}, flags?: readonly string[]): Promise<ServerChild> {
    progress(`starting ${what}…`);
    // Tracing is off unless the row asks for it, whatever the shell that runs the bench has set.
    const server = await this.start(name, script, { ...withoutTracing(process.env), ...env }, flags);
    if (server.room === undefined) throw new Error(`${name} did not say where its room listens`);
    progress(`seeding ${SEEDED_POSTS.toLocaleString('en-US')} posts through room's gRPC API at ${server.room}…`);
    await seedRoom(server.room, SEEDED_POSTS);
    return server;
  }

  private async baseline(name: string, script: string): Promise<ServerChild> {
    const { response } = await page((await this.embedded()).origin);
    progress(`starting ${name}, replaying the first page (${response.body.length.toLocaleString('en-US')} bytes)…`);
    const server = await this.start(name, script, { ...process.env, ...cannedEnv(response) });
    await assertReplays(server, response);
    return server;
  }
}

/** An environment without the OpenTelemetry SDK's variables: no process of it exports spans. */
function withoutTracing(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([name]) => !name.startsWith('OTEL_')));
}

/** A baseline is only fair if it sends exactly what the product sent. */
async function assertReplays(server: ServerChild, response: CapturedResponse): Promise<void> {
  const replay = await capture(server.origin);
  if (replay.status !== response.status || !replay.body.equals(response.body) || replay.contentType !== response.contentType) {
    throw new Error(`${server.name} does not replay the captured response (${replay.status}, ${replay.contentType}, ${replay.body.length} bytes)`);
  }
}
