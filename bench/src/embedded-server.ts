// Child process: the whole product in embedded mode with 1,000 posts in the room; prints {"port":N}.
import { startEmbedded } from '@agentroom/gateway';
import { announcePort, SEEDED_POSTS, stopOnSignal } from './children.js';
import { seedRoom } from './seed.js';

const embedded = await startEmbedded({
  ...process.env,
  PORT: '0',
  LOG_LEVEL: 'warn',
  // The load comes from one address; the default daily quota would turn it into 429s.
  QUOTA_PER_ADDRESS: '1000000000',
  QUOTA_PER_TOKEN: '1000000000',
  // autocannon has closed its sockets by the time we stop; no need to wait the default 10 s.
  SHUTDOWN_GRACE_MS: '1000',
});
stopOnSignal(() => embedded.stop());
await seedRoom(embedded.roomPort, SEEDED_POSTS);
announcePort(embedded.port);
