import { randomBytes } from 'node:crypto';
import { codePointLength, DomainError, hashSecret, type PublicUrls, type Scope, SCOPES } from '@agentroom/kit';
import type { DeviceFlow, Grant, Human } from './records.js';
import type { RoomGateway } from './room.gateway.js';
import type { AuthStore } from './store.js';
import type { Tokens } from './tokens.js';
import { formatUserCode, newUserCode, normalizeUserCode } from './user-code.js';

/** RFC 8628 timings of CONTRACT §3. */
export const EXPIRES_IN_SECONDS = 900;
export const INTERVAL_SECONDS = 3;
const RETAIN_AFTER_EXPIRY_MS = 3_600_000;

export interface StartedFlow {
  deviceCode: string;
  userCode: string;
  expiresIn: number;
  interval: number;
  scopes: Scope[];
}

export type PollResult = { status: 'pending' } | { status: 'completed'; grant: Grant };

/** What the approval page shows about a flow. */
export interface FlowView {
  userCode: string;
  agentName: string;
  scopes: Scope[];
  widening?: { agentId: string; approvedAt: string; heldScopes: Scope[] };
}

/** Checks scopes as asked: a non-empty list of known scopes, answered in canonical order. */
export function checkScopes(scopes: readonly string[]): Scope[] {
  const unknown = scopes.filter((scope) => !(SCOPES as readonly string[]).includes(scope));
  if (scopes.length === 0 || unknown.length > 0) {
    throw new DomainError('invalid-scope', {
      detail: scopes.length === 0 ? 'No scopes were asked for.' : `Unknown scopes: ${unknown.map((s) => JSON.stringify(s)).join(', ')}.`,
      remedy: `Ask for one or more of: ${SCOPES.join(', ')}; the fewest you need.`,
      extensions: { valid_scopes: [...SCOPES] },
    });
  }
  return SCOPES.filter((scope) => scopes.includes(scope));
}

function agentNameOf(agentName: string, clientId: string): string {
  for (const candidate of [agentName, clientId]) {
    const name = candidate.trim().replace(/\s+/g, ' ');
    if (name !== '') {
      if (codePointLength(name) > 100) {
        throw new DomainError('invalid-request', { detail: 'agent_name is longer than 100 characters.', remedy: 'Send an agent_name of at most 100 characters.', extensions: { parameter: 'agent_name' } });
      }
      return name;
    }
  }
  return 'unnamed agent';
}

/**
 * The device authorization flow (RFC 8628, CONTRACT §3): agents start and poll it, a signed-in
 * human approves or declines it, and approval mints the token and writes the agent to the room.
 */
export class DeviceFlows {
  constructor(
    private readonly store: AuthStore,
    private readonly tokens: Tokens,
    private readonly room: RoomGateway,
    private readonly urls: PublicUrls,
    private readonly now: () => number,
  ) {}

  private restart(): string {
    return `Start a new signup: POST ${this.urls.apiUrl}/agent/signup/start.`;
  }

  async start(input: { scopes: readonly string[]; agentName: string; clientId: string; bearerToken: string }): Promise<StartedFlow> {
    const scopes = checkScopes(input.scopes);
    let agentName = agentNameOf(input.agentName, input.clientId);
    let widen: DeviceFlow['widen'];
    if (input.bearerToken !== '') {
      // Same identity, more scopes: the flow belongs to the token's agent (CONTRACT §3).
      const record = await this.tokens.authenticateRecord(input.bearerToken);
      const held = new Set((await this.tokens.liveOfAgent(record.agentId)).flatMap((t) => t.scopes));
      widen = { agentId: record.agentId, humanId: record.humanId, approvedAt: new Date(record.createdAt).toISOString(), heldScopes: SCOPES.filter((s) => held.has(s)) };
      agentName = record.agentName;
    }
    const deviceCode = randomBytes(32).toString('base64url');
    const createdAt = this.now();
    let userCode = newUserCode();
    // 20^8 codes: a clash with a live one is rare, but must not hand one flow's approval to another.
    while (await this.store.flowByUserCode(userCode)) userCode = newUserCode();
    const flow: DeviceFlow = {
      deviceHash: hashSecret(deviceCode),
      userCode,
      scopes,
      agentName,
      ...(widen ? { widen } : {}),
      createdAt,
      expiresAt: createdAt + EXPIRES_IN_SECONDS * 1000,
      retainUntil: createdAt + EXPIRES_IN_SECONDS * 1000 + RETAIN_AFTER_EXPIRY_MS,
      status: 'pending',
    };
    await this.store.createFlow(flow);
    return { deviceCode, userCode: formatUserCode(userCode), expiresIn: EXPIRES_IN_SECONDS, interval: INTERVAL_SECONDS, scopes };
  }

  async poll(deviceCode: string): Promise<PollResult> {
    const hash = hashSecret(deviceCode);
    const flow = await this.store.flowByDevice(hash);
    if (!flow) {
      throw new DomainError('signup-unknown', {
        detail: 'No signup has this device code, or its token was already delivered (it is delivered once).',
        remedy: this.restart(),
      });
    }
    const now = this.now();
    const gate = await this.store.admitPoll(hash, INTERVAL_SECONDS * 1000, now);
    if (!gate.admitted) {
      const wait = Math.max(1, Math.ceil(gate.retryAfterMs / 1000));
      throw new DomainError('slow-down', {
        detail: `Polled again within ${INTERVAL_SECONDS} seconds.`,
        remedy: `Wait ${wait} seconds (Retry-After), then poll at most every ${INTERVAL_SECONDS} seconds.`,
        headers: { 'Retry-After': String(wait) },
      });
    }
    if (flow.status === 'declined') {
      await this.store.deleteFlow(flow);
      throw new DomainError('signup-declined', { detail: 'The human declined this signup.', remedy: `${this.restart()} Ask the human first if they are willing to approve it.` });
    }
    if (flow.status === 'pending' && now >= flow.expiresAt) {
      await this.store.deleteFlow(flow);
      throw new DomainError('signup-expired', { detail: `Nobody approved the signup within ${EXPIRES_IN_SECONDS / 60} minutes.`, remedy: this.restart() });
    }
    if (flow.status === 'pending') return { status: 'pending' };
    // Approved: of concurrent polls, only the one that takes the record gets the token.
    const taken = await this.store.takeFlow(hash);
    if (!taken?.grant) {
      throw new DomainError('signup-unknown', { detail: 'The token of this signup was already delivered (it is delivered once).', remedy: this.restart() });
    }
    return { status: 'completed', grant: taken.grant };
  }

  /** The pending flow of a code a human typed; a wrong or expired code says nothing about others. */
  private async pendingFlow(userCodeInput: string): Promise<DeviceFlow> {
    const code = normalizeUserCode(userCodeInput);
    const flow = code === undefined ? undefined : await this.store.flowByUserCode(code);
    if (!flow || flow.status !== 'pending' || this.now() >= flow.expiresAt) {
      throw new DomainError('user-code-unknown', {
        detail: 'No signup waits for this code: it is mistyped, or it expired.',
        remedy: 'Type the code exactly as the agent shows it (XXXX-XXXX), or ask the agent to start a new signup.',
      });
    }
    return flow;
  }

  private checkWidener(flow: DeviceFlow, human: Human): void {
    if (flow.widen && flow.widen.humanId !== human.id) {
      throw new DomainError('invalid-request', {
        detail: `${flow.agentName} asks for more scopes, and only the human who approved it can grant them.`,
        remedy: 'Ask the human who approved this agent to open the link, or have the agent start a signup without its token to become a new agent.',
      });
    }
  }

  async describe(userCodeInput: string, human: Human): Promise<FlowView> {
    const flow = await this.pendingFlow(userCodeInput);
    this.checkWidener(flow, human);
    return {
      userCode: formatUserCode(flow.userCode),
      agentName: flow.agentName,
      scopes: flow.scopes,
      ...(flow.widen ? { widening: { agentId: flow.widen.agentId, approvedAt: flow.widen.approvedAt, heldScopes: flow.widen.heldScopes } } : {}),
    };
  }

  /** Approval: mint the token (frozen scopes), write the agent to the room, keep the token for one poll. */
  async approve(userCodeInput: string, human: Human): Promise<FlowView> {
    const flow = await this.pendingFlow(userCodeInput);
    this.checkWidener(flow, human);
    const agentId = flow.widen?.agentId ?? (await this.room.upsertAgent({ id: '', agentName: flow.agentName, humanLabel: human.name, scopes: flow.scopes }));
    const { token, record } = await this.tokens.mint({ agentId, agentName: flow.agentName, humanId: human.id, humanLabel: human.name, scopes: flow.scopes });
    if (flow.widen) {
      // The agent record's scopes are the union of its live tokens' (CONTRACT §3).
      const held = new Set((await this.tokens.liveOfAgent(agentId)).flatMap((t) => t.scopes));
      await this.room.upsertAgent({ id: agentId, agentName: flow.agentName, humanLabel: human.name, scopes: SCOPES.filter((s) => held.has(s)) });
    }
    const grant: Grant = { accessToken: token, tokenId: record.id, agentId, humanLabel: human.name, scopes: flow.scopes, expiresAt: record.expiresAt };
    await this.store.updateFlow({ ...flow, status: 'approved', grant });
    return { userCode: formatUserCode(flow.userCode), agentName: flow.agentName, scopes: flow.scopes };
  }

  async decline(userCodeInput: string, human: Human): Promise<FlowView> {
    const flow = await this.pendingFlow(userCodeInput);
    this.checkWidener(flow, human);
    await this.store.updateFlow({ ...flow, status: 'declined' });
    return { userCode: formatUserCode(flow.userCode), agentName: flow.agentName, scopes: flow.scopes };
  }
}
