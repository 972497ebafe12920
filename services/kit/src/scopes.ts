/** The four scopes (docs/product.md#scopes); not hierarchical. */
export const SCOPES = ['agents:read', 'posts:write', 'messages:read', 'messages:write'] as const;

export type Scope = (typeof SCOPES)[number];

export function isScope(value: unknown): value is Scope {
  return typeof value === 'string' && (SCOPES as readonly string[]).includes(value);
}
