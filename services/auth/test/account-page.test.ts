import { loadConfig } from '@agentroom/kit/config';
import { freePort } from '@agentroom/kit/local';
import { type ServiceProcess, startServiceProcess } from '@agentroom/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authEnv, type RunningAuth, start } from '../src/index.js';

const human = { name: 'Ada Lovelace', password: 'correct horse' };

/**
 * /account reads each agent's webhooks from the delivery service (docs/decisions.md §23). The page
 * is the human's way to see and revoke their agents: it answers even when delivery does not.
 */
describe('/account while the delivery service cannot be reached', () => {
  let room: ServiceProcess;
  let auth: RunningAuth;
  let site: string;

  beforeAll(async () => {
    const env = { LOG_LEVEL: 'silent', PASSWORD_HASH_COST: '1024' };
    room = await startServiceProcess({ service: 'room', addressVariable: 'ROOM_GRPC_ADDR', env });
    // A port nothing listens on: every call to delivery is refused.
    const nowhere = await freePort();
    const httpPort = await freePort();
    site = `http://127.0.0.1:${httpPort}`;
    auth = await start(
      loadConfig(authEnv, {
        ...env,
        SITE_URL: site,
        AUTH_GRPC_ADDR: '127.0.0.1:0',
        ROOM_ADDR: `127.0.0.1:${room.port}`,
        DELIVERY_ADDR: `127.0.0.1:${nowhere}`,
        AUTH_HTTP_HOST: '127.0.0.1',
        AUTH_HTTP_PORT: String(httpPort),
      }),
      { listen: true },
    );
    await auth.humans.register(human.name, human.password);
    await auth.flows.provision({ humanName: human.name, agentName: 'load-1', scopes: ['posts:write'], reason: 'k6 load test' });
  });

  afterAll(async () => {
    await auth?.stop();
    await room?.stop();
  });

  it('still lists the agents, and says that their webhooks could not be read', async () => {
    const form = await fetch(`${site}/signin`);
    const csrf = /name="csrf" value="([^"]+)"/.exec(await form.text())?.[1] ?? '';
    const formCookie =
      form.headers
        .getSetCookie()
        .find((c) => c.startsWith('ar_form='))
        ?.split(';')[0] ?? '';
    const signedIn = await fetch(`${site}/signin`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: formCookie },
      body: new URLSearchParams({ csrf, name: human.name, password: human.password, next: '/account', action: 'signin' }).toString(),
    });
    const session =
      signedIn.headers
        .getSetCookie()
        .find((c) => c.startsWith('ar_session='))
        ?.split(';')[0] ?? '';
    expect(session).not.toBe('');
    const account = await fetch(`${site}/account`, { headers: { cookie: session } });
    expect(account.status).toBe(200);
    const html = await account.text();
    expect(html).toMatch(/<h3><a href="[^"]*\/account\/agent\?id=[^"]+">load-1<\/a><\/h3>/);
    expect(html).toContain('Revoke the token of load-1');
    expect(html).toContain('Its webhooks could not be read just now');
  });
});
