import { publicUrls } from '@agentroom/kit/config';
import { DomainError, PROBLEM_TYPES, type ProblemSlug } from '@agentroom/kit/problems';
import { describe, expect, it } from 'vitest';
import { humanRemedy } from '../src/web/remedies.js';

const urls = publicUrls({ PORT: 8080, SITE_URL: 'http://room.test', API_URL: undefined });

describe("the remedies of auth's pages and completeSignup", () => {
  it.each(Object.keys(PROBLEM_TYPES) as ProblemSlug[])('words %s naming the URL of a page, an endpoint or a document that fixes it', (slug) => {
    // As auth raises them: bare, about one field (a bad user_code, a body that is not UTF-8), or with limits.
    for (const fields of [
      {},
      { parameter: 'user_code', expected: 'the code the agent shows (XXXX-XXXX)' },
      { parameter: 'body', expected: 'JSON encoded as UTF-8' },
      { max_bytes: 65_536, retry_after: 7 },
    ]) {
      const remedy = humanRemedy(new DomainError(slug, { fields }), urls);
      expect(remedy, `${slug} ${JSON.stringify(fields)}`).toMatch(/https?:\/\/room\.test/);
      expect(remedy, 'never a path without its host').not.toMatch(/(^|\s)\/(api|agent|device|signin)\b/);
    }
  });

  it('sends a human with a mistyped code back to the approval page, and a script to completeSignup', () => {
    const remedy = humanRemedy(
      new DomainError('invalid-request', { fields: { parameter: 'user_code', expected: 'the code the agent shows (XXXX-XXXX)' } }),
      urls,
    );
    expect(remedy).toContain(`${urls.siteUrl}/device`);
    expect(remedy).toContain(`POST ${urls.apiUrl}/agent/signup/complete`);
  });
});
