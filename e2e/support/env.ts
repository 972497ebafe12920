/**
 * Cheap password hashes for a product a test starts: scrypt at its production cost takes most of
 * a second a password. vitest.config.ts sets the same for processes that read their environment.
 */
export const FAST_PASSWORDS = { PASSWORD_HASH_COST: process.env.PASSWORD_HASH_COST ?? '1024' } as const;
