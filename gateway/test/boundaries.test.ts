import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const gateway = new URL('../', import.meta.url);
const SERVICES = ['@agentroom/auth', '@agentroom/edge', '@agentroom/messaging', '@agentroom/room', '@agentroom/launcher'];

/**
 * The gateway (route table, discovery documents, router, Envoy config) is what Envoy rendering and
 * the Helm chart read: it must load without any service, so it may not import one.
 */
describe('the gateway imports no service', () => {
  it('declares no service among its dependencies', () => {
    const manifest = JSON.parse(readFileSync(new URL('package.json', gateway), 'utf8')) as { dependencies?: Record<string, string>; devDependencies?: Record<string, string> };
    const declared = Object.keys({ ...manifest.dependencies, ...manifest.devDependencies });
    expect(declared.filter((name) => SERVICES.includes(name))).toEqual([]);
  });

  it('imports no service from any source file', () => {
    const sources = readdirSync(new URL('src/', gateway), { recursive: true, encoding: 'utf8' }).filter((file) => file.endsWith('.ts'));
    expect(sources.length).toBeGreaterThan(5);
    const offenders = sources.filter((file) => {
      const text = readFileSync(new URL(`src/${file}`, gateway), 'utf8');
      return SERVICES.some((name) => text.includes(`'${name}'`) || text.includes(`'${name}/`));
    });
    expect(offenders).toEqual([]);
  });
});
