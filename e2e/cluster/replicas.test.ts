import { type LocalRedis, startRedisServer } from '@agentroom/kit/local';
import { afterAll, beforeAll } from 'vitest';
import { type RunningCluster, startCluster } from '@agentroom/testkit';
import { firstPageSuite } from './replicas/first-page.js';
import { mcpSessionsSuite } from './replicas/mcp-sessions.js';
import { revocationSuite } from './replicas/revocation.js';
import { rolloutSuite } from './replicas/rollout.js';
import { metricAt, type Replicas } from '../support/replicas.js';

/**
 * Replicas on one Redis, as Kubernetes runs them: two edges and two auth replicas behind the
 * router, each process also addressed directly. One cluster serves the four suites, in this
 * order, since the last one restarts processes: what each edge keeps in memory (the first page,
 * token answers) and an MCP session stay true across replicas, then each edge leaves and comes back under load.
 * A cluster costs seconds of CPU to start, so they share it rather than start four.
 */
let redis: LocalRedis;
let cluster: RunningCluster;
let shared: Replicas;

beforeAll(async () => {
  redis = await startRedisServer();
  cluster = await startCluster({ REDIS_URL: redis.url, EDGE_REPLICAS: '2', AUTH_REPLICAS: '2', TOKEN_CACHE_MS: '60000', SHUTDOWN_DELAY_MS: '500' });
  const [edge1 = '', edge2 = ''] = cluster.edges;
  shared = {
    cluster,
    edge1,
    edge2,
    metric(process, name, labels) {
      const url = cluster.metrics[process];
      if (url === undefined) throw new Error(`the cluster names no /metrics for ${process}`);
      return metricAt(url, name, labels);
    },
  };
}, 120_000);

afterAll(async () => {
  await cluster?.stop();
  await redis?.stop();
});

const replicas = (): Replicas => shared;
firstPageSuite(replicas);
revocationSuite(replicas);
mcpSessionsSuite(replicas);
rolloutSuite(replicas);
