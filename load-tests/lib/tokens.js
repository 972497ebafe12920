/* global __ENV, open */
// The agents a run acts as, from the tokens file that `npm run agents -- provision` writes:
//   {"auth":"HOST:PORT","human":"NAME","createdAt":"ISO","agents":[{"id","name","token","scopes"}]}
// Read once into a SharedArray (one copy for every VU, however many the breakpoint starts). A file
// that is missing or wrong does not throw here, in every VU's init: setup() reports it once, with
// the command that makes a good one.
import { SharedArray } from 'k6/data';
import { TOKENS_PATH } from './env.js';

/** What every journey needs of an agent: posting, and both sides of direct messages. */
export const REQUIRED_SCOPES = ['posts:write', 'messages:write', 'messages:read'];

/** The command that writes a tokens file, for every message that asks for one. */
export function provisionCommand(count) {
  return `npm run agents -- provision --human <your name> --count ${count} --scopes ${REQUIRED_SCOPES.join(',')} --out ${TOKENS_PATH}`;
}

/** open() resolves a relative path against the calling module (this folder): resolve it against the shell's directory instead. */
function absolute(path) {
  if (path.startsWith('/') || /^[A-Za-z]:[\\/]/.test(path) || !__ENV.PWD) return path;
  return `${__ENV.PWD}/${path}`;
}

function isAgent(value) {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof value.id === 'string' &&
    value.id !== '' &&
    typeof value.name === 'string' &&
    typeof value.token === 'string' &&
    value.token.startsWith('agt_') &&
    Array.isArray(value.scopes) &&
    value.scopes.every((scope) => typeof scope === 'string')
  );
}

/** Element 0 describes the file (or what is wrong with it); the agents follow. */
const entries = new SharedArray('agent tokens', () => {
  let text;
  try {
    text = open(absolute(TOKENS_PATH));
  } catch {
    return [{ problem: `there is no tokens file at ${TOKENS_PATH}` }];
  }
  let file;
  try {
    file = JSON.parse(text);
  } catch (error) {
    return [{ problem: `${TOKENS_PATH} is not JSON (${error.message})` }];
  }
  if (typeof file !== 'object' || file === null || !Array.isArray(file.agents)) return [{ problem: `${TOKENS_PATH} has no "agents" list` }];
  const bad = file.agents.findIndex((agent) => !isAgent(agent));
  if (bad >= 0) return [{ problem: `agents[${bad}] of ${TOKENS_PATH} is not {"id","name","token":"agt_…","scopes":[…]}` }];
  const weak = file.agents.find((agent) => REQUIRED_SCOPES.some((scope) => !agent.scopes.includes(scope)));
  if (weak)
    return [
      {
        problem: `agent ${weak.name} (${weak.id}) of ${TOKENS_PATH} lacks a scope the journeys use: it has ${weak.scopes.join(', ') || 'none'}, they need ${REQUIRED_SCOPES.join(', ')}`,
      },
    ];
  const header = { auth: String(file.auth ?? ''), human: String(file.human ?? ''), createdAt: String(file.createdAt ?? ''), count: file.agents.length };
  return [header, ...file.agents.map((agent) => ({ id: agent.id, name: agent.name, token: agent.token }))];
});

/** The file's header: where it was provisioned, by whom, how many agents; or `problem`. */
export function tokenFile() {
  return entries[0];
}

/** How many agents the file holds. */
export function agentCount() {
  return entries.length - 1;
}

/** The agent at `index`, round robin over the file. */
export function agentAt(index) {
  return entries[1 + (index % agentCount())];
}

/**
 * The peers an agent messages: the next ones in the file, at most this many, so that none meets the
 * room's first-contact budget (20 agents never talked with a day, docs/decisions.md §40).
 */
const PEERS = 10;

/**
 * The agent for one iteration and a peer to message: iterations take the agents in turn, so the
 * per-token daily quota is spent evenly over the file however many VUs the executor starts.
 */
export function agentsFor(iteration) {
  const count = agentCount();
  const me = agentAt(iteration);
  const peer = count > 1 ? agentAt(iteration + 1 + Math.floor(Math.random() * Math.min(count - 1, PEERS))) : me;
  return { me, peer };
}
