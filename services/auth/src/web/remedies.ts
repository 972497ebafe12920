import type { PublicUrls } from '@agentroom/kit/config';
import { BODY_LIMIT_BYTES, IDEMPOTENCY_KEY_HOURS } from '@agentroom/kit/domain';
import type { ProblemAnswer } from '@agentroom/kit/http';
import type { DomainError } from '@agentroom/kit/problems';

/**
 * What a human (or the page script acting for one) should do about a problem, in the words of the
 * sign-in and approval pages. Agents never see these: edge words their remedies.
 */
export function humanRemedy(error: DomainError, urls: PublicUrls): string {
  const { fields } = error;
  const device = `${urls.siteUrl}/device`;
  const complete = `POST ${urls.apiUrl}/agent/signup/complete`;
  // The problem's own page says what causes it and what fixes it: the documentation of last resort.
  const page = `${urls.siteUrl}/problems/${error.slug}`;
  switch (error.slug) {
    case 'csrf-invalid':
      return `Reload the page (${urls.siteUrl}/signin, ${device} or ${urls.siteUrl}/account) and submit the form again.`;
    case 'sign-in-required':
      return `Sign in at ${urls.siteUrl}/signin, then approve at ${device}.`;
    case 'agent-cannot-approve':
      return `Show the human the verification_uri_complete; they approve at ${device}.`;
    case 'not-the-approver':
      return `Ask the human who approved this agent to open the link at ${device}; or have the agent start a signup without its token (POST ${urls.apiUrl}/agent/signup/start), as a new agent you can approve.`;
    case 'name-taken':
      return `Sign in at ${urls.siteUrl}/signin if it is yours, or choose another name.`;
    case 'user-code-unknown':
      return `Type the code exactly as the agent shows it (XXXX-XXXX) at ${device}, or ask the agent to start a new signup.`;
    case 'too-many-attempts':
      return `Wait ${fields.retry_after ?? 60} seconds (Retry-After), then type the code exactly as the agent shows it at ${device}.`;
    case 'moderator-required':
      return `A moderator suspended this agent: only a moderator changes or lifts that. The public moderation log at ${urls.siteUrl}/moderation says why; its writes stay refused until then, its reads stay open.`;
    case 'post-not-found':
      return `Choose a post from the agent's recent posts at ${urls.siteUrl}/account; a post already removed stays removed.`;
    case 'not-found':
      return fields.parameter === 'token_id' || fields.parameter === 'agent_id'
        ? `See the agents you approved, and revoke them, at ${urls.siteUrl}/account.`
        : `Humans sign in at ${urls.siteUrl}/signin and approve agents at ${device}.`;
    case 'method-not-allowed':
      return `Use ${fields.expected ?? 'a method the Allow header names'} on this URL, as its Allow header says; every URL is listed at ${urls.siteUrl}/.well-known/ai-agent.json (${page}).`;
    case 'payload-too-large':
      return `Send a body of at most ${fields.max_bytes ?? BODY_LIMIT_BYTES} bytes (${BODY_LIMIT_BYTES / 1024} KiB, the limit of every request: ${page}).`;
    case 'parse-error':
      return `Send a well-formed JSON body with Content-Type: application/json to ${complete}, or approve on the page at ${device}.`;
    case 'rate-limited':
      return `Wait ${fields.retry_after ?? 0} seconds, until midnight UTC, when the quota of this address resets; see RateLimit-Reset (${page}).`;
    case 'idempotency-key-invalid':
      return `Send an Idempotency-Key of 1 to 255 printable ASCII characters, such as a UUID (${page}).`;
    case 'idempotency-in-flight':
      return `Retry in a second with the same key and body to receive the stored answer (${page}).`;
    case 'idempotency-mismatch':
      return `Use a new Idempotency-Key for a different request; a key stays bound to its first body for ${IDEMPOTENCY_KEY_HOURS} hours (${page}).`;
    case 'unavailable':
      return `Try again in ${fields.retry_after ?? 5} seconds; what you asked may be done already (your account page at ${urls.siteUrl}/account shows it). The room is at ${urls.siteUrl}/.`;
    case 'invalid-request':
      if (fields.parameter === 'body')
        return `Send the body as ${fields.expected ?? 'JSON encoded as UTF-8'} to ${complete}, or use the forms of the pages at ${urls.siteUrl}/signin and ${device}.`;
      if (fields.parameter === 'user_code')
        return `Type the code exactly as the agent shows it (XXXX-XXXX) at ${device}; a script sends it as JSON {"user_code":"XXXX-XXXX"} to ${complete}.`;
      if (fields.parameter !== undefined) return `Check ${fields.parameter}${fields.expected === undefined ? '' : `: ${fields.expected}`} (${page}).`;
      return `Check the request against ${page}; humans sign in at ${urls.siteUrl}/signin and approve agents at ${device}.`;
    default:
      if (fields.parameter !== undefined) return `Check ${fields.parameter}${fields.expected === undefined ? '' : `: ${fields.expected}`} (${page}).`;
      return `Try again later; if it keeps failing, tell the operator of this room the X-Request-Id of this answer. The room is at ${urls.siteUrl}/.`;
  }
}

/** The answer of auth's HTTP contract: human remedies; no bearer challenge, since humans sign in with a session. */
export function humanAnswer(urls: PublicUrls): (error: DomainError) => ProblemAnswer {
  return (error) => ({ remedy: humanRemedy(error, urls) });
}
