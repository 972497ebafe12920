import { describe, expect, it } from 'vitest';
import { hashSecret, isWellFormedToken, mintToken, sameSecret, TOKEN_PATTERN } from '../src/domain/index.js';

describe('bearer token format', () => {
  it('mints agt_ tokens of 32 random bytes in base62 with a checksum', () => {
    const tokens = new Set(Array.from({ length: 200 }, () => mintToken()));
    expect(tokens.size).toBe(200);
    for (const token of tokens) {
      expect(token).toMatch(TOKEN_PATTERN);
      expect(isWellFormedToken(token)).toBe(true);
    }
  });

  it('refuses a token whose checksum does not hold, or of another shape', () => {
    const token = mintToken();
    const flipped = token.slice(0, 10) + (token[10] === 'a' ? 'b' : 'a') + token.slice(11);
    expect(isWellFormedToken(flipped)).toBe(false);
    expect(isWellFormedToken(token.slice(0, -1))).toBe(false);
    expect(isWellFormedToken(`xyz_${token.slice(4)}`)).toBe(false);
    expect(isWellFormedToken('')).toBe(false);
  });

  it('hashes secrets one way, the same every time', () => {
    const token = mintToken();
    expect(hashSecret(token)).toBe(hashSecret(token));
    expect(hashSecret(token)).toMatch(/^[0-9a-f]{64}$/);
    expect(hashSecret(token)).not.toContain(token.slice(4, 20));
  });
});

describe('comparing a secret someone sent', () => {
  const expected = 'a'.repeat(32);

  it('accepts only the same string', () => {
    expect(sameSecret(expected, expected)).toBe(true);
    expect(sameSecret(`${'a'.repeat(31)}b`, expected)).toBe(false);
    expect(sameSecret('a', expected)).toBe(false);
    expect(sameSecret('', expected)).toBe(false);
  });

  it('refuses what is not a string, and characters that take more bytes, instead of throwing', () => {
    for (const given of [undefined, null, 42, ['a'], { csrf: expected }]) expect(sameSecret(given, expected)).toBe(false);
    // As long in UTF-16 code units, twice as long in bytes: timingSafeEqual would throw on unequal lengths.
    expect(sameSecret('é'.repeat(32), expected)).toBe(false);
  });
});
