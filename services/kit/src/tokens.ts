import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { crc32 } from 'node:zlib';

/**
 * Bearer tokens: `agt_` + 32 random bytes in base62 (43 characters) + a 6-character base62
 * CRC32 of those, so a leaked token is recognisable offline and a mistyped one is refused
 * before any lookup (docs/decisions.md §4, after GitHub's token formats).
 */
export const TOKEN_PREFIX = 'agt_';
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const SECRET_LENGTH = 43;
const CHECKSUM_LENGTH = 6;
export const TOKEN_PATTERN = /^agt_[0-9A-Za-z]{49}$/;

function base62(value: bigint, length: number): string {
  let out = '';
  let rest = value;
  while (rest > 0n) {
    out = BASE62[Number(rest % 62n)] + out;
    rest /= 62n;
  }
  return out.padStart(length, '0');
}

function checksum(secret: string): string {
  return base62(BigInt(crc32(secret)), CHECKSUM_LENGTH);
}

/** A new token; only its hash is ever stored. */
export function mintToken(): string {
  const secret = base62(BigInt(`0x${randomBytes(32).toString('hex')}`), SECRET_LENGTH);
  return `${TOKEN_PREFIX}${secret}${checksum(secret)}`;
}

/** True when the string has our shape and its checksum holds: no store is asked otherwise. */
export function isWellFormedToken(token: string): boolean {
  if (!TOKEN_PATTERN.test(token)) return false;
  const secret = token.slice(TOKEN_PREFIX.length, TOKEN_PREFIX.length + SECRET_LENGTH);
  return token.slice(TOKEN_PREFIX.length + SECRET_LENGTH) === checksum(secret);
}

/**
 * Refresh tokens of the authorization code flow: `agr_` and the same body and checksum as an access
 * token, so neither can be mistaken for the other, in a log or at an endpoint.
 */
export const REFRESH_TOKEN_PREFIX = 'agr_';
const REFRESH_TOKEN_PATTERN = /^agr_[0-9A-Za-z]{49}$/;

/** A new refresh token; only its hash is ever stored. */
export function mintRefreshToken(): string {
  return `${REFRESH_TOKEN_PREFIX}${mintToken().slice(TOKEN_PREFIX.length)}`;
}

/** True when the string is a refresh token whose checksum holds. */
export function isWellFormedRefreshToken(token: string): boolean {
  return REFRESH_TOKEN_PATTERN.test(token) && isWellFormedToken(`${TOKEN_PREFIX}${token.slice(REFRESH_TOKEN_PREFIX.length)}`);
}

/** SHA-256 of a high-entropy secret (token, device code, session id), as stored. */
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/**
 * Whether a secret someone sent (a CSRF token, say) is the expected one, in constant time, so
 * timing does not tell how much of a guess was right. Anything but a string is never equal.
 */
export function sameSecret(given: unknown, expected: string): boolean {
  if (typeof given !== 'string') return false;
  const a = Buffer.from(given, 'utf8');
  const b = Buffer.from(expected, 'utf8');
  return a.length === b.length && timingSafeEqual(a, b);
}
