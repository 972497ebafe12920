import type { Embedded } from '../../launcher/src/embedded.js';

/** Problem fields the tests read. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  code: string;
  remedy: string;
  detail?: string;
  required_scope?: string;
  held_scopes?: string[];
  parameter?: string;
  retry_after?: number;
}

/**
 * An agent as docs/product.md describes it: starts a signup, has a human approve it (through
 * the auth service's own approval step, the one its pages call), polls, and holds the token.
 */
export async function signUp(
  app: Embedded,
  scopes: string[],
  agentName: string,
  human: { name: string; password: string },
  bearer?: string,
): Promise<{ token: string; human: string }> {
  const started = await fetch(`${app.urls.apiUrl}/agent/signup/start`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(bearer ? { authorization: `Bearer ${bearer}` } : {}) },
    body: JSON.stringify({ scopes, agent_name: agentName }),
  });
  if (started.status !== 200) throw new Error(`signup start answered ${started.status}: ${await started.text()}`);
  const flow = (await started.json()) as { device_code: string; user_code: string };
  const approver = (await app.auth.humans.verify(human.name, human.password)) ?? (await app.auth.humans.register(human.name, human.password));
  await app.auth.flows.approve(flow.user_code, approver);
  const polled = await fetch(`${app.urls.apiUrl}/agent/signup/poll?device_code=${encodeURIComponent(flow.device_code)}`);
  if (polled.status !== 200) throw new Error(`signup poll answered ${polled.status}: ${await polled.text()}`);
  const body = (await polled.json()) as { access_token: string; human: string };
  return { token: body.access_token, human: body.human };
}

export function post(app: Embedded, token: string | undefined, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${app.urls.baseUrl}/posts`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}
