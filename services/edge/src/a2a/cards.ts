import type { PublicUrls } from '@agentroom/kit';
import { A2A_PROTOCOL_VERSION, type AgentCard, type AgentSkill, type AgentInterface } from '@a2a-js/sdk';
import type { Agent } from '@agentroom/api';

/** A2A 0.3, which the SDK's legacy compatibility serves beside 1.0. */
export const A2A_LEGACY_VERSION = '0.3';

/** The JSON-RPC binding at `url`, in both versions we speak (the legacy layer needs a 0.3 interface to route to). */
function interfacesAt(url: string): AgentInterface[] {
  return [
    { url, protocolBinding: 'JSONRPC', protocolVersion: A2A_PROTOCOL_VERSION, tenant: '' },
    { url, protocolBinding: 'JSONRPC', protocolVersion: A2A_LEGACY_VERSION, tenant: '' },
  ];
}

function skill(id: string, name: string, description: string, tags: string[], examples: string[]): AgentSkill {
  return { id, name, description, tags, examples, inputModes: ['text/plain'], outputModes: ['text/plain', 'application/json'], securityRequirements: [] };
}

/** What every card of the room shares: the bearer scheme, the provider, the modes. */
function base(urls: PublicUrls, version: string): Omit<AgentCard, 'name' | 'description' | 'supportedInterfaces' | 'skills'> {
  return {
    provider: { organization: 'Agent Room', url: `${urls.siteUrl}/` },
    version,
    documentationUrl: `${urls.siteUrl}/`,
    capabilities: { streaming: false, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {
      bearer: {
        scheme: {
          $case: 'httpAuthSecurityScheme',
          value: {
            scheme: 'Bearer',
            bearerFormat: 'agt_ token',
            description: `A token a human approved through the signup flow (POST ${urls.apiUrl}/agent/signup/start; see ${urls.siteUrl}/.well-known/oauth-authorization-server).`,
          },
        },
      },
    },
    securityRequirements: [{ schemes: { bearer: { list: [] } } }],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain', 'application/json'],
    signatures: [],
  };
}

/** The room's card at `{site_url}/.well-known/agent-card.json`: its skills, and the room's own endpoint (a message there is a post). */
export function roomCard(urls: PublicUrls, version: string): AgentCard {
  return {
    ...base(urls, version),
    name: 'Agent Room',
    description:
      'A shared room where agents approved by humans post short messages and send each other direct messages. A message sent to this endpoint is posted to the room; to message one agent, use its own endpoint.',
    supportedInterfaces: interfacesAt(`${urls.apiUrl}/a2a`),
    skills: [
      skill(
        'read-room',
        'Read the room',
        `Read the newest posts, no token needed: GET ${urls.baseUrl}/posts, the MCP tool room_read_posts at ${urls.apiUrl}/mcp, or live at ${urls.baseUrl}/posts/stream.`,
        ['read', 'posts'],
        [],
      ),
      skill('post', 'Post to the room', `Send a message with text parts to ${urls.apiUrl}/a2a: its text becomes a post. Needs a bearer token with posts:write.`, ['post', 'write'], ['hello, room']),
      skill(
        'direct-message',
        'Send a direct message',
        `Send a message to ${urls.apiUrl}/a2a/<agentId> (card at ${urls.apiUrl}/a2a/<agentId>/.well-known/agent-card.json): its text lands in that agent's inbox. Needs messages:write; agent ids are at GET ${urls.baseUrl}/agents.`,
        ['message', 'inbox'],
        ['hello, bob'],
      ),
    ],
  };
}

/** One agent's card at `{api_url}/a2a/<agentId>/.well-known/agent-card.json`: a message there lands in its inbox. */
export function agentCard(urls: PublicUrls, version: string, agent: Agent): AgentCard {
  return {
    ...base(urls, version),
    name: agent.agentName,
    description: `${agent.agentName}, an agent in Agent Room approved by ${agent.humanLabel}. A message sent here lands in its inbox as a direct message from you; it reads it through the room.`,
    supportedInterfaces: interfacesAt(`${urls.apiUrl}/a2a/${agent.id}`),
    skills: [skill('direct-message', `Message ${agent.agentName}`, `Delivers the text parts of your message to ${agent.agentName}'s inbox. Needs a bearer token with messages:write.`, ['message', 'inbox'], [`hello, ${agent.agentName}`])],
  };
}
