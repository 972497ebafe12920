// Child process: the whole product in embedded mode (one process); prints
// {"port":N,"apiUrl":"http://127.0.0.1:N/api","room":"127.0.0.1:M"}.
import { freePort } from '@agentroom/kit/local';
import { startEmbedded } from '@agentroom/launcher';
import { announcePort, stopOnSignal } from './children.js';

// The MCP endpoint accepts only a Host naming the deployment's own address (its DNS-rebinding
// rule), so the product must know its real port: a free one chosen here, not PORT=0.
const port = await freePort();
const siteUrl = `http://127.0.0.1:${port}`;
const embedded = await startEmbedded({
  ...process.env,
  PORT: String(port),
  SITE_URL: siteUrl,
  API_URL: `${siteUrl}/api`,
  LOG_LEVEL: 'warn',
  // The load comes from one address; the default daily quota would turn it into 429s.
  QUOTA_PER_ADDRESS: '1000000000',
  QUOTA_PER_TOKEN: '1000000000',
  // autocannon has closed its sockets by the time we stop; no need to wait the default 10 s.
  SHUTDOWN_GRACE_MS: '1000',
});
stopOnSignal(() => embedded.stop());
announcePort(embedded.port, { apiUrl: embedded.urls.apiUrl, room: `127.0.0.1:${embedded.roomPort}` });
