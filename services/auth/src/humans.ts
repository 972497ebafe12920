import { randomBytes, randomUUID, scrypt, timingSafeEqual } from 'node:crypto';
import { codePointLength, hashSecret } from '@agentroom/kit/domain';
import { DomainError } from '@agentroom/kit/problems';
import type { Clock } from '@agentroom/kit/store';
import type { Human, Session } from './records.js';
import type { AuthStore } from './store.js';

/** How long a sign-in lasts; the pages' cookie lives as long. */
export const SESSION_TTL_SECONDS = 7 * 86_400;
export const HUMAN_NAME_MAX = 100;
export const PASSWORD_MIN = 8;
/** scrypt reads the whole password; a bound keeps one request from costing much. */
const PASSWORD_MAX = 1_024;
const KEY_LENGTH = 64;
/** OWASP's scrypt N for 32 MiB (N=2^15, r=8, p=3): the production default of PASSWORD_HASH_COST. */
export const DEFAULT_PASSWORD_HASH_COST = 2 ** 15;
/** Bounds of PASSWORD_HASH_COST; the upper one is also the most a stored hash may ask of verification. */
export const PASSWORD_HASH_COST_MIN = 2 ** 10;
export const PASSWORD_HASH_COST_MAX = 2 ** 20;
const R = 8;
const P = 3;

interface ScryptCost {
  N: number;
  r: number;
  p: number;
}

function derive(password: string, salt: Buffer, cost: ScryptCost): Promise<Buffer> {
  // scrypt needs a little over 128·N·r bytes; Node's default maxmem (32 MiB) is just short of that here.
  const options = { ...cost, maxmem: 256 * cost.N * cost.r };
  return new Promise((resolve, reject) => scrypt(password, salt, KEY_LENGTH, options, (error, key) => (error ? reject(error) : resolve(key))));
}

/**
 * `scrypt$<N>$<r>$<p>$<salt>$<key>`, salt and key base64url; the salt is random per password. The
 * cost travels with the hash, so a hash keeps verifying after PASSWORD_HASH_COST changes.
 */
export async function hashPassword(password: string, N: number = DEFAULT_PASSWORD_HASH_COST): Promise<string> {
  const cost = { N, r: R, p: P };
  const salt = randomBytes(16);
  const key = await derive(password, salt, cost);
  return ['scrypt', cost.N, cost.r, cost.p, salt.toString('base64url'), key.toString('base64url')].join('$');
}

/** Compares in constant time, so timing does not tell how much of a guess was right. */
export async function passwordMatches(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, key, ...rest] = stored.split('$');
  const cost = { N: Number(n), r: Number(r), p: Number(p) };
  if (scheme !== 'scrypt' || salt === undefined || key === undefined || rest.length > 0) return false;
  if (![cost.N, cost.r, cost.p].every((value) => Number.isInteger(value) && value > 0) || cost.N > PASSWORD_HASH_COST_MAX || cost.r > 32 || cost.p > 16)
    return false;
  const expected = Buffer.from(key, 'base64url');
  const actual = await derive(password, Buffer.from(salt, 'base64url'), cost);
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

export interface OpenSession {
  /** The cookie value; only its hash is stored. */
  sessionId: string;
  /** Holds the CSRF token every form of this session carries. */
  session: Session;
}

export interface HumansOptions {
  store: AuthStore;
  clock: Clock;
  /** scrypt N of new hashes (PASSWORD_HASH_COST); the production default when absent. */
  passwordHashCost?: number;
}

function nameTaken(): DomainError {
  return new DomainError('name-taken', { detail: 'That name is taken.', fields: { parameter: 'name' } });
}

/** Human accounts (display name + password) and their sign-in sessions (docs/decisions.md §5). */
export class Humans {
  private readonly store: AuthStore;
  private readonly clock: Clock;
  private readonly cost: number;
  private decoy: Promise<string> | undefined;

  constructor(options: HumansOptions) {
    this.store = options.store;
    this.clock = options.clock;
    this.cost = options.passwordHashCost ?? DEFAULT_PASSWORD_HASH_COST;
  }

  /** Compared against when a name is unknown, so timing does not tell which names exist; made once, at the cost of new hashes. */
  private decoyHash(): Promise<string> {
    this.decoy ??= hashPassword(randomUUID(), this.cost);
    return this.decoy;
  }

  /** A new account; the name is the `humanLabel` of every agent this human approves. */
  async register(name: string, password: string): Promise<Human> {
    const display = name.trim().replace(/\s+/g, ' ');
    const length = codePointLength(display);
    if (length < 1 || length > HUMAN_NAME_MAX || /\p{Cc}/u.test(display)) {
      throw new DomainError('invalid-request', {
        detail: `The name must be 1 to ${HUMAN_NAME_MAX} printable characters.`,
        fields: { parameter: 'name', expected: `1 to ${HUMAN_NAME_MAX} printable characters; agents you approve show it as their human` },
      });
    }
    const passwordLength = codePointLength(password);
    if (passwordLength < PASSWORD_MIN || passwordLength > PASSWORD_MAX) {
      throw new DomainError('invalid-request', {
        detail: `The password must be ${PASSWORD_MIN} to ${PASSWORD_MAX} characters.`,
        fields: { parameter: 'password', expected: `${PASSWORD_MIN} to ${PASSWORD_MAX} characters` },
      });
    }
    // Registering says whether a name is taken anyway, so a taken one need not cost a hash first.
    if (await this.store.humanByName(display)) throw nameTaken();
    const human: Human = {
      id: `h_${randomBytes(12).toString('base64url')}`,
      name: display,
      passwordHash: await hashPassword(password, this.cost),
      createdAt: this.clock.now(),
    };
    if (!(await this.store.createHuman(human))) throw nameTaken();
    return human;
  }

  /** The human whose name (any case) and password these are, or undefined. */
  async verify(name: string, password: string): Promise<Human | undefined> {
    const human = codePointLength(password) > PASSWORD_MAX ? undefined : await this.store.humanByName(name);
    if (!human) {
      await passwordMatches(password.slice(0, PASSWORD_MAX), await this.decoyHash());
      return undefined;
    }
    return (await passwordMatches(password, human.passwordHash)) ? human : undefined;
  }

  byId(id: string): Promise<Human | undefined> {
    return this.store.humanById(id);
  }

  /** Signs a human in: a random session id for the cookie, stored only as its hash, and a CSRF token. */
  async openSession(humanId: string): Promise<OpenSession> {
    const sessionId = randomBytes(32).toString('base64url');
    const session: Session = {
      idHash: hashSecret(sessionId),
      humanId,
      csrf: randomBytes(24).toString('base64url'),
      expiresAt: this.clock.now() + SESSION_TTL_SECONDS * 1000,
    };
    await this.store.saveSession(session);
    return { sessionId, session };
  }

  /** The live session of a cookie value, with its human; undefined when unknown or expired. */
  async session(sessionId: string): Promise<{ session: Session; human: Human } | undefined> {
    const session = await this.store.session(hashSecret(sessionId));
    if (!session || session.expiresAt <= this.clock.now()) return undefined;
    const human = await this.store.humanById(session.humanId);
    return human ? { session, human } : undefined;
  }

  /**
   * Makes the human of this name (any case) a moderator of the room, or no longer one. Answers the
   * human, or undefined when no human has the name.
   */
  async setModerator(name: string, moderator: boolean): Promise<Human | undefined> {
    const human = await this.store.humanByName(name);
    if (human === undefined) return undefined;
    await this.store.setModerator(human.id, moderator);
    return human;
  }

  /** The room's moderators, by name order. */
  async moderators(): Promise<Human[]> {
    const found = await Promise.all((await this.store.moderators()).map((id) => this.store.humanById(id)));
    return found.filter((human): human is Human => human !== undefined).sort((a, b) => a.name.localeCompare(b.name));
  }

  isModerator(humanId: string): Promise<boolean> {
    return this.store.isModerator(humanId);
  }

  /** Signs out: the cookie value stops working at once. */
  closeSession(sessionId: string): Promise<void> {
    return this.store.deleteSession(hashSecret(sessionId));
  }
}
