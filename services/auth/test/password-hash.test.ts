import { loadConfig } from '@agentroom/kit/config';
import { describe, expect, it } from 'vitest';
import { authEnv } from '../src/config.js';
import { DEFAULT_PASSWORD_HASH_COST, hashPassword, Humans, passwordMatches, PASSWORD_HASH_COST_MIN } from '../src/humans.js';
import type { Human } from '../src/records.js';
import { MemoryAuthStore } from '../src/store-memory.js';

const clock = { now: () => Date.now() };

/** The cost fields of a stored hash: `scrypt$<N>$<r>$<p>$…`. */
function costOf(stored: string): string {
  return stored.split('$').slice(0, 4).join('$');
}

describe('password hash cost (PASSWORD_HASH_COST)', () => {
  it("defaults to OWASP's scrypt N = 2^15 when nothing is set", () => {
    expect(loadConfig(authEnv, {}).PASSWORD_HASH_COST).toBe(2 ** 15);
    expect(DEFAULT_PASSWORD_HASH_COST).toBe(2 ** 15);
  });

  it('takes a power of two between 2^10 and 2^20, and refuses anything else', () => {
    expect(loadConfig(authEnv, { PASSWORD_HASH_COST: '1024' }).PASSWORD_HASH_COST).toBe(1024);
    expect(loadConfig(authEnv, { PASSWORD_HASH_COST: String(2 ** 20) }).PASSWORD_HASH_COST).toBe(2 ** 20);
    for (const value of ['512', String(2 ** 21), '3000', '0', 'fast', '1024.5']) {
      expect(() => loadConfig(authEnv, { PASSWORD_HASH_COST: value })).toThrow(/PASSWORD_HASH_COST/);
    }
  });

  it('stores the cost with each hash; a Humans without the setting hashes at the strong default', async () => {
    const strong = new Humans({ store: new MemoryAuthStore(clock), clock });
    const human = await strong.register('Strong Default', 'correct horse battery');
    expect(costOf(human.passwordHash)).toBe('scrypt$32768$8$3');
    const cheap = new Humans({ store: new MemoryAuthStore(clock), clock, passwordHashCost: PASSWORD_HASH_COST_MIN });
    expect(costOf((await cheap.register('Cheap Test', 'correct horse battery')).passwordHash)).toBe('scrypt$1024$8$3');
  });

  it('verifies each hash at the cost it was made with, so existing hashes keep working after the setting changes', async () => {
    const store = new MemoryAuthStore(clock);
    // A hash made at the production cost, before this deployment lowered (or raised) it.
    const existing: Human = {
      id: 'h_existing',
      name: 'Old Timer',
      passwordHash: await hashPassword('made long ago', DEFAULT_PASSWORD_HASH_COST),
      createdAt: clock.now(),
    };
    expect(await store.createHuman(existing)).toBe(true);
    const humans = new Humans({ store, clock, passwordHashCost: PASSWORD_HASH_COST_MIN });
    expect((await humans.verify('Old Timer', 'made long ago'))?.id).toBe('h_existing');
    expect(await humans.verify('Old Timer', 'made long ago!')).toBeUndefined();
    const fresh = await humans.register('New Comer', 'made just now');
    expect(await passwordMatches('made just now', fresh.passwordHash)).toBe(true);
    expect((await humans.verify('new comer', 'made just now'))?.id).toBe(fresh.id);
  });

  it('refuses a stored hash that asks for more than the highest cost', async () => {
    const hash = await hashPassword('whatever it is', PASSWORD_HASH_COST_MIN);
    expect(await passwordMatches('whatever it is', hash.replace('scrypt$1024$', `scrypt$${2 ** 21}$`))).toBe(false);
  });
});
