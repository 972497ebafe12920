// The Redis Cluster failover scenario on its own: `node bench/dist/redis-failover-main.js` after
// `npm run build` (`npm run chaos -- --redis-cluster` runs the same).
import { runRedisFailover } from './redis-failover.js';

process.exit(await runRedisFailover());
