import { randomBytes, randomUUID, scrypt, timingSafeEqual } from 'node:crypto';
import { codePointLength, DomainError, hashSecret } from '@agentroom/kit';
import type { Human, Session } from './records.js';
import type { AuthStore } from './store.js';

const SESSION_TTL_MS = 7 * 86_400_000;
const KEY_LENGTH = 64;
// scrypt cost: N=2^15, r=8, p=1 (OWASP's minimum is 2^17 with less memory; this needs 32 MiB).
const COST = { N: 2 ** 15, r: 8, p: 1, maxmem: 64 * 1024 * 1024 };

function derive(password: string, salt: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => scrypt(password, salt, KEY_LENGTH, COST, (error, key) => (error ? reject(error) : resolve(key))));
}

/** `scrypt$<salt>$<key>`, both base64url. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  return `scrypt$${salt.toString('base64url')}$${(await derive(password, salt)).toString('base64url')}`;
}

export async function passwordMatches(password: string, stored: string): Promise<boolean> {
  const [scheme, salt, key] = stored.split('$');
  if (scheme !== 'scrypt' || salt === undefined || key === undefined) return false;
  const expected = Buffer.from(key, 'base64url');
  const actual = await derive(password, Buffer.from(salt, 'base64url'));
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

export interface OpenSession {
  /** The cookie value; only its hash is stored. */
  sessionId: string;
  session: Session;
}

/** Human accounts (name + password) and their sessions. */
export class Humans {
  // Compared against when a name is unknown, so timing does not tell which names exist.
  private readonly decoy = hashPassword(randomUUID());

  constructor(
    private readonly store: AuthStore,
    private readonly now: () => number,
  ) {}

  async register(name: string, password: string): Promise<Human> {
    const display = name.trim().replace(/\s+/g, ' ');
    if (codePointLength(display) < 1 || codePointLength(display) > 100) {
      throw new DomainError('invalid-request', { detail: 'The name must be 1 to 100 characters.', remedy: 'Choose a name of 1 to 100 characters.' });
    }
    if (password.length < 8 || password.length > 1024) {
      throw new DomainError('invalid-request', { detail: 'The password must be 8 characters or more.', remedy: 'Choose a password of at least 8 characters.' });
    }
    const human: Human = { id: `h_${randomBytes(9).toString('base64url')}`, name: display, passwordHash: await hashPassword(password), createdAt: this.now() };
    if (!(await this.store.createHuman(human))) {
      throw new DomainError('invalid-request', { detail: 'That name is taken.', remedy: 'Sign in if it is yours, or choose another name.' });
    }
    return human;
  }

  /** The human whose name and password these are, or undefined. */
  async verify(name: string, password: string): Promise<Human | undefined> {
    const human = await this.store.humanByName(name);
    if (!human) {
      await passwordMatches(password, await this.decoy);
      return undefined;
    }
    return (await passwordMatches(password, human.passwordHash)) ? human : undefined;
  }

  byId(id: string): Promise<Human | undefined> {
    return this.store.humanById(id);
  }

  async openSession(humanId: string): Promise<OpenSession> {
    const sessionId = randomBytes(32).toString('base64url');
    const session: Session = { idHash: hashSecret(sessionId), humanId, csrf: randomBytes(24).toString('base64url'), expiresAt: this.now() + SESSION_TTL_MS };
    await this.store.saveSession(session, SESSION_TTL_MS);
    return { sessionId, session };
  }

  /** The live session of a cookie value, with its human. */
  async session(sessionId: string): Promise<{ session: Session; human: Human } | undefined> {
    const session = await this.store.session(hashSecret(sessionId));
    if (!session || session.expiresAt <= this.now()) return undefined;
    const human = await this.store.humanById(session.humanId);
    return human ? { session, human } : undefined;
  }

  closeSession(sessionId: string): Promise<void> {
    return this.store.deleteSession(hashSecret(sessionId));
  }
}

/** Limits wrong user codes so codes cannot be guessed (CONTRACT §3: 10 per 15 minutes). */
export class AttemptLimiter {
  constructor(
    private readonly store: AuthStore,
    private readonly now: () => number,
    readonly max = 10,
    readonly windowMs = 15 * 60_000,
  ) {}

  /** Throws `too-many-attempts` when any key (a session, a client address) has spent its wrong codes. */
  async guard(keys: string[]): Promise<void> {
    for (const key of keys) {
      if ((await this.store.attemptCount(key)) >= this.max) {
        throw new DomainError('too-many-attempts', {
          detail: `More than ${this.max} wrong codes in ${this.windowMs / 60_000} minutes.`,
          remedy: 'Wait 15 minutes, then type the code exactly as the agent shows it.',
          headers: { 'Retry-After': String(this.windowMs / 1000) },
        });
      }
    }
  }

  async fail(keys: string[]): Promise<void> {
    for (const key of keys) await this.store.countAttempt(key, this.windowMs, this.now());
  }
}
