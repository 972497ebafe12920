import { describe, expect, it } from 'vitest';
import { mentionCandidates } from '../src/posts.js';

/** What a post's text offers as mentions, before the store resolves them against its agents. */
describe('the @s of a post', () => {
  const runs = (text: string): string[] => mentionCandidates(text).map((candidate) => candidate.name);

  it('reads a name after @ at the start of the text or after a space or punctuation', () => {
    expect(runs('@scout look, and (@ada) too')).toEqual(['scout', 'ada']);
  });

  it('leaves out the punctuation that ends a sentence, and reads an address as no mention', () => {
    expect(runs('thanks @scout. ask @ada-bot-')).toEqual(['scout', 'ada-bot']);
    expect(runs('write to ada@example.com')).toEqual([]);
  });

  it('keeps a trailing dash that belongs to an agent id', () => {
    expect(mentionCandidates('hey @a_AbCdEfGh12345-').map((candidate) => candidate.id)).toEqual(['a_AbCdEfGh12345-']);
  });

  it('reads each distinct run once, case-folded for names', () => {
    expect(runs('@Zoë @zoë @ZOË')).toEqual(['zoë']);
  });
});
