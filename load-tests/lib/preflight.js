// setup(): before the first iteration, make sure the run can measure something. It stops the test
// (k6 exit code 108) with one clear sentence when the target does not answer, is degraded, has
// spent its quota, or when the tokens file is missing, wrong, refused by this target, or too small
// for the planned load under the target's daily quotas, and says what to run to fix it. What it
// returns (the URLs from the manifest, the settings) is every iteration's `data`.
import exec from 'k6/execution';
import http from 'k6/http';
import { BASE_URL, fraction, REQUEST_TIMEOUT, TOKENS_PATH } from './env.js';
import { JOURNEYS } from './journeys.js';
import { plannedIterations } from './scenarios.js';
import { agentAt, agentCount, provisionCommand, tokenFile } from './tokens.js';

/** The fewest agents a run takes: direct messages go to another agent than the sender. */
const MIN_AGENTS = 2;

const RAISE_QUOTAS =
  'start the target with larger daily quotas, e.g. `QUOTA_PER_ADDRESS=1000000000 QUOTA_PER_TOKEN=1000000000 npm run cluster` (on a deployment: the same variables on edge and auth; quota.perAddress and quota.perToken in the Helm chart), or wait for midnight UTC';

function stop(message) {
  exec.test.abort(message);
}

function setupParams(name, headers = {}) {
  return { headers, tags: { journey: 'setup', name }, timeout: REQUEST_TIMEOUT };
}

/** A response header, whatever case the server and Go's canonical form gave it. */
function header(response, name) {
  const wanted = name.toLowerCase();
  const key = Object.keys(response.headers).find((candidate) => candidate.toLowerCase() === wanted);
  return key === undefined ? undefined : response.headers[key];
}

function quotaSpent(response, whose) {
  return `${response.request.url} answered 429: the target's daily quota for ${whose} is spent (RateLimit-Limit ${header(response, 'RateLimit-Limit') ?? '?'}, resets in ${header(response, 'RateLimit-Reset') ?? '?'} s). A load run sends every anonymous request from this one address, far past the default QUOTA_PER_ADDRESS of 5,000 a day: ${RAISE_QUOTAS}.`;
}

function json(response) {
  try {
    return response.json();
  } catch {
    return undefined;
  }
}

/** Where everything is, from the manifest: the one URL we are given is the site's. */
function discover() {
  const url = `${BASE_URL}/.well-known/ai-agent.json`;
  const response = http.get(url, setupParams('GET {site}/.well-known/ai-agent.json'));
  if (response.status === 0) {
    stop(
      `nothing answers at ${BASE_URL} (${response.error}). Start the room first (\`npm run cluster\`, or \`npm run cluster -- --envoy\`) or set BASE_URL to the site URL of a running deployment.`,
    );
  }
  if (response.status === 429) stop(quotaSpent(response, 'this address'));
  const manifest = json(response);
  const rest = manifest?.interfaces?.rest?.url;
  const mcp = manifest?.interfaces?.mcp?.url;
  const a2aRoom = manifest?.interfaces?.a2a?.room_endpoint;
  if (response.status !== 200 || typeof rest !== 'string' || typeof mcp !== 'string' || typeof a2aRoom !== 'string') {
    stop(
      `${url} answered ${response.status} without an Agent Room manifest: BASE_URL must be the site URL of the room (the one that serves /.well-known/ai-agent.json), not its API.`,
    );
  }
  return { site: BASE_URL, rest, mcp, a2aRoom };
}

/** The API answers and says it is healthy; answers what is left of this address's quota today. */
function healthy(urls) {
  // 503 is an answer here (degraded), judged below, not a failed request in the run's figures.
  const response = http.get(`${urls.rest}/health`, { ...setupParams('GET {rest}/health'), responseCallback: http.expectedStatuses(200, 503) });
  if (response.status === 0)
    stop(`the manifest at ${BASE_URL} answers but its API does not: GET ${urls.rest}/health failed (${response.error}). Is every process of the target up?`);
  if (response.status === 429) stop(quotaSpent(response, 'this address'));
  const health = json(response);
  // `npm start` without REDIS_URL keeps everything in memory and says "degraded" for that alone: a fine target on a laptop.
  const inMemory =
    health?.status === 'degraded' && health.checks?.storage === 'memory' && health.checks.room === 'serving' && health.checks.messaging === 'serving';
  if (health?.status !== 'healthy' && !inMemory) {
    stop(
      `${urls.rest}/health answered ${response.status} ${JSON.stringify(health?.checks ?? response.body?.slice(0, 200))}: the target is not ready; wait for it, or look at the failing check before measuring it.`,
    );
  }
  return Number(header(response, 'RateLimit-Remaining') ?? Infinity);
}

/** The tokens file is there and large enough; every token is accepted here; answers the least quota any token has left. */
function tokensWork(urls) {
  const file = tokenFile();
  if (file.problem !== undefined) stop(`${file.problem}. Create one with \`${provisionCommand(200)}\` (TOKENS names another file).`);
  const count = agentCount();
  if (count < MIN_AGENTS)
    stop(`${TOKENS_PATH} holds ${count} agent(s); a run needs at least ${MIN_AGENTS} (direct messages go to another agent): \`${provisionCommand(200)}\`.`);
  const agents = Array.from({ length: count }, (_, i) => agentAt(i));
  const answers = http.batch(
    agents.map((agent) => [
      'GET',
      `${urls.rest}/messages?limit=1`,
      null,
      setupParams('GET {rest}/messages (token check)', { Authorization: `Bearer ${agent.token}` }),
    ]),
  );
  const spent = answers.find((response) => response.status === 429);
  if (spent) stop(quotaSpent(spent, 'a token of the file'));
  const refused = answers.map((response, i) => ({ response, agent: agents[i] })).filter(({ response }) => response.status !== 200);
  if (refused.length > 0) {
    const { response, agent } = refused[0];
    const problem = json(response);
    stop(
      `${refused.length} of ${count} tokens in ${TOKENS_PATH} were refused by ${BASE_URL} (agent ${agent.name}: ${response.status} ${problem?.code ?? response.error ?? ''}). ` +
        `The file was provisioned against auth ${file.auth || '?'} at ${file.createdAt || '?'}: tokens work only on the deployment whose auth issued them, and stop when revoked. Provision new ones for this target: \`${provisionCommand(count)}\`.`,
    );
  }
  return Math.min(...answers.map((response) => Number(header(response, 'RateLimit-Remaining') ?? Infinity)));
}

/**
 * Checks the target and the tokens for the run's scenarios (as k6 consolidated them, command-line
 * overrides included) and answers every iteration's data. `settings.retryShare`: the share of posts retried on purpose
 * with the same Idempotency-Key (RETRY_SHARE, default 0.25).
 */
export function preflight(scenarioName, settings = {}) {
  const resolved = { retryShare: settings.retryShare ?? fraction('RETRY_SHARE', 0.25) };
  const urls = discover();
  const addressLeft = healthy(urls);
  const tokenLeft = tokensWork(urls);

  // What the plan asks of the daily quotas, if it runs to its end (a breakpoint run stops sooner).
  const plan = plannedIterations(exec.test.options.scenarios);
  let anonymous = 0;
  let withToken = 0;
  for (const journey of JOURNEYS) {
    const perIteration = journey.requests(resolved);
    anonymous += plan[journey.tag] * perIteration.anonymous;
    withToken += plan[journey.tag] * perIteration.token;
  }
  if (anonymous > addressLeft) {
    stop(
      `this ${scenarioName} run plans up to ${Math.ceil(anonymous)} requests without a token from this one address, and the target allows ${addressLeft} more today (QUOTA_PER_ADDRESS): ${RAISE_QUOTAS}.`,
    );
  }
  const count = agentCount();
  if (withToken / count > tokenLeft) {
    const needed = Math.ceil(withToken / tokenLeft);
    stop(
      `this ${scenarioName} run plans up to ${Math.ceil(withToken)} requests with tokens, spread over the ${count} agents of ${TOKENS_PATH}; the target allows ${tokenLeft} more per token today (QUOTA_PER_TOKEN), so the run needs at least ${needed} agents: ` +
        `\`${provisionCommand(needed)}\`, or ${RAISE_QUOTAS}.`,
    );
  }
  return { ...urls, scenario: scenarioName, agents: count, settings: resolved };
}
