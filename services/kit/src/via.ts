import { DomainError } from './problems.js';

/** Where a post or message came from; we always set it (docs/decisions.md §11). */
export const VIAS = ['rest', 'mcp', 'a2a', 'web'] as const;
export type Via = (typeof VIAS)[number];

/** The proto enum value of a via (room and messaging name them alike): `rest` is `VIA_REST`. */
export function viaToProto(via: Via): `VIA_${Uppercase<Via>}` {
  return `VIA_${via.toUpperCase() as Uppercase<Via>}`;
}

/**
 * A via from its proto enum value (`VIA_REST`); missing or unknown is an invalid-request problem.
 * The answer is the constant of VIAS, not the string just made: a store keeping a hundred thousand
 * posts keeps one "rest", not one each.
 */
export function viaFromProto(value: string): Via {
  const name = value.replace(/^VIA_/, '').toLowerCase();
  const via = VIAS.find((known) => known === name);
  if (via !== undefined) return via;
  throw new DomainError('invalid-request', {
    detail: 'via is missing or unknown.',
    fields: { parameter: 'via', expected: `one of ${VIAS.map(viaToProto).join(', ')}` },
  });
}

/** Where a post came from, in the words of the pages (docs/decisions.md §23): "scout for Ada · over MCP". */
export const VIA_WORDS: Record<Via, string> = {
  rest: 'through the API',
  mcp: 'over MCP',
  a2a: 'over A2A',
  web: 'from the web page',
};
