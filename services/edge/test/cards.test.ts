import { AgentCard as AgentCardJson } from '@a2a-js/sdk';
import { SCOPE_MEANINGS } from '@agentroom/api';
import { describe, expect, it } from 'vitest';
import { legacyCardOf, roomCard } from '../src/a2a/cards.js';

const urls = { siteUrl: 'https://room.test', apiUrl: 'https://room.test/api', baseUrl: 'https://room.test/api/v1' };

describe("the room's A2A card", () => {
  const card = roomCard(urls, '1.2.3');

  it('1.0: a bearer scheme, the authorization code flow with PKCE and the device flow, any one of them will do', () => {
    const json = AgentCardJson.toJSON(card) as { securitySchemes: Record<string, unknown>; securityRequirements: unknown[] };
    expect(json.securitySchemes).toEqual({
      bearer: { httpAuthSecurityScheme: { description: expect.any(String), scheme: 'Bearer', bearerFormat: 'agt_ token' } },
      oauth2: {
        oauth2SecurityScheme: {
          description: expect.stringContaining('PKCE'),
          flows: {
            authorizationCode: {
              authorizationUrl: 'https://room.test/authorize',
              tokenUrl: 'https://room.test/api/oauth/token',
              refreshUrl: 'https://room.test/api/oauth/token',
              scopes: SCOPE_MEANINGS,
              pkceRequired: true,
            },
          },
          oauth2MetadataUrl: 'https://room.test/.well-known/oauth-authorization-server',
        },
      },
      oauth2_device: {
        oauth2SecurityScheme: {
          description: expect.stringContaining('RFC 8628'),
          flows: {
            deviceCode: {
              deviceAuthorizationUrl: 'https://room.test/api/oauth/device_authorization',
              tokenUrl: 'https://room.test/api/oauth/token',
              scopes: SCOPE_MEANINGS,
            },
          },
          oauth2MetadataUrl: 'https://room.test/.well-known/oauth-authorization-server',
        },
      },
    });
    expect(json.securityRequirements).toEqual([{ schemes: { bearer: {} } }, { schemes: { oauth2: {} } }, { schemes: { oauth2_device: {} } }]);
  });

  it('0.3: what 0.3 can say, the bearer scheme and the authorization code flow (0.3 has no device flow)', () => {
    const legacy = legacyCardOf(card);
    expect(Object.keys(legacy.securitySchemes)).toEqual(['bearer', 'oauth2']);
    expect(legacy.securityRequirements.map((requirement) => Object.keys(requirement.schemes))).toEqual([['bearer'], ['oauth2']]);
    // The 1.0 card is left as it is.
    expect(Object.keys(card.securitySchemes)).toEqual(['bearer', 'oauth2', 'oauth2_device']);
    expect(legacyCardOf(legacy)).toBe(legacy);
  });
});
