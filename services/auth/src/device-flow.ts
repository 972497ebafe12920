import { randomBytes } from 'node:crypto';
import { codePointLength, hashSecret, type Scope, SCOPES, SIGNUP_EXPIRES_IN_SECONDS, SIGNUP_POLL_INTERVAL_SECONDS } from '@agentroom/kit/domain';
import { createLogger, type Logger } from '@agentroom/kit/log';
import { DomainError } from '@agentroom/kit/problems';
import type { Clock } from '@agentroom/kit/store';
import type { DeviceAnswer, DeviceFlow, Grant, Human, TokenRecord } from './records.js';
import type { RoomGateway } from './room.gateway.js';
import type { AuthStore } from './store.js';
import type { Tokens } from './tokens.js';
import { formatUserCode, newUserCode, normalizeUserCode } from './user-code.js';

/** RFC 8628 timings of docs/decisions.md §3, kit's limits. */
const EXPIRES_IN_SECONDS = SIGNUP_EXPIRES_IN_SECONDS;
const INTERVAL_SECONDS = SIGNUP_POLL_INTERVAL_SECONDS;
/** A flow is kept this long past expiry, so a late poll learns "expired" rather than "unknown". */
const RETAIN_AFTER_EXPIRY_MS = 3_600_000;

/** The key of a human's answer to a code (docs/decisions.md §23). */
function answerKey(humanId: string, userCode: string): string {
  return `${humanId}:${userCode}`;
}
export const AGENT_NAME_MAX = 100;
/** What the approval page calls an agent that gave neither agent_name nor client_id. */
export const DEFAULT_AGENT_NAME = 'an agent';

export interface StartFlowInput {
  scopes: readonly string[];
  /** Empty when not given. */
  agentName: string;
  /** OAuth client_id; empty when not given. */
  clientId: string;
  /** A live token of the agent that asks to widen itself; empty for a new agent. */
  bearerToken: string;
}

export interface StartedFlow {
  /** The secret the agent polls with; stored only as its hash. */
  deviceCode: string;
  /** As humans see it: XXXX-XXXX. */
  userCode: string;
  expiresIn: number;
  interval: number;
  scopes: Scope[];
}

export type PollResult = { status: 'pending' } | { status: 'completed'; grant: Grant; /** Seconds until the token expires. */ expiresIn: number };

/** What the approval page shows about a flow. */
export interface FlowView {
  /** XXXX-XXXX. */
  userCode: string;
  agentName: string;
  scopes: Scope[];
  /** Set when the flow asks more scopes for an agent that exists (docs/decisions.md §3). */
  widening?: {
    agentId: string;
    agentName: string;
    /** The id of the human who approved the agent: the only one who may approve this flow. */
    approvedBy: string;
    /** RFC 3339: when the token that started this flow was approved. */
    approvedAt: string;
    /** The agent's scopes when the flow started (the union of its live tokens'). */
    heldScopes: Scope[];
  };
}

/** Checks scopes as asked: a non-empty list of known scopes, answered once each in canonical order. */
export function checkScopes(scopes: readonly string[]): Scope[] {
  const unknown = scopes.filter((scope) => !(SCOPES as readonly string[]).includes(scope));
  if (scopes.length === 0 || unknown.length > 0) {
    throw new DomainError('invalid-scope', {
      detail: scopes.length === 0 ? 'No scopes were asked for.' : `Unknown scopes: ${unknown.map((s) => JSON.stringify(s.slice(0, 50))).join(', ')}.`,
      fields: { parameter: 'scopes', valid_scopes: [...SCOPES] },
    });
  }
  return SCOPES.filter((scope) => scopes.includes(scope));
}

/** agent_name, else client_id, else "an agent": trimmed, white space collapsed, 1 to 100 code points. */
export function agentNameOf(agentName: string, clientId: string): string {
  for (const [parameter, value] of [
    ['agent_name', agentName],
    ['client_id', clientId],
  ] as const) {
    const name = value.trim().replace(/\s+/g, ' ');
    if (name === '') continue;
    if (codePointLength(name) > AGENT_NAME_MAX || /\p{Cc}/u.test(name)) {
      throw new DomainError('invalid-request', {
        detail: `${parameter} must be 1 to ${AGENT_NAME_MAX} printable characters.`,
        fields: {
          parameter,
          expected: `1 to ${AGENT_NAME_MAX} characters (Unicode code points, white space collapsed), at least one not white space, no control characters; humans see it on the approval page`,
        },
      });
    }
    return name;
  }
  return DEFAULT_AGENT_NAME;
}

/** The longest reason an operator may give for provisioning; the account page shows it whole. */
export const PROVISION_REASON_MAX = 200;
/** How much of an unknown human's name an error repeats. */
const HUMAN_NAME_SHOWN = 100;

/** An operator's request for one approved agent in a human's name (docs: load-tests/README.md). */
export interface ProvisionInput {
  /** The display name of a human who has an account, any case. */
  humanName: string;
  agentName: string;
  scopes: readonly string[];
  /** Why, as the human will read it on their account page. */
  reason: string;
  /** Who asked (the gRPC peer), for the log line only. */
  caller?: string;
}

/** A provisioned agent, with its token: the only time the token is told. */
export interface ProvisionedAgent {
  agentId: string;
  agentName: string;
  token: string;
  tokenId: string;
  scopes: Scope[];
  /** The human's display name, as their agents show it. */
  human: string;
  /** Epoch ms. */
  expiresAt: number;
}

/** A provisioning reason: trimmed, white space collapsed, 1 to 200 code points, no control characters. */
export function provisionReasonOf(reason: string): string {
  const text = reason.trim().replace(/\s+/g, ' ');
  if (text === '' || codePointLength(text) > PROVISION_REASON_MAX || /\p{Cc}/u.test(text)) {
    throw new DomainError('invalid-request', {
      detail: `reason must be 1 to ${PROVISION_REASON_MAX} printable characters.`,
      fields: { parameter: 'reason', expected: `1 to ${PROVISION_REASON_MAX} characters, shown to the human on their account page (e.g. "k6 load test")` },
    });
  }
  return text;
}

export interface DeviceFlowsOptions {
  store: AuthStore;
  tokens: Tokens;
  room: RoomGateway;
  clock: Clock;
  log?: Logger;
  /** `{site_url}/signin`, where a human who has no account yet registers; errors of provisioning name it. */
  signinUrl?: string;
}

/**
 * The device authorization flow (RFC 8628, docs/decisions.md §3): agents start and poll it, a signed-in
 * human approves or declines it, and approval mints the token and writes the agent to the room.
 * States: pending → (approving →) approved → consumed (deleted by the poll that takes the token),
 * or pending → declined; a pending flow past `expiresAt` is expired.
 */
export class DeviceFlows {
  private readonly store: AuthStore;
  private readonly tokens: Tokens;
  private readonly room: RoomGateway;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly signinUrl: string;

  constructor(options: DeviceFlowsOptions) {
    this.store = options.store;
    this.tokens = options.tokens;
    this.room = options.room;
    this.clock = options.clock;
    this.log = options.log ?? createLogger('auth', 'silent');
    this.signinUrl = options.signinUrl ?? '/signin';
  }

  async start(input: StartFlowInput): Promise<StartedFlow> {
    const scopes = checkScopes(input.scopes);
    let agentName = agentNameOf(input.agentName, input.clientId);
    let widen: DeviceFlow['widen'];
    if (input.bearerToken !== '') {
      // Same identity, more scopes: the flow belongs to the token's agent (docs/decisions.md §3).
      const record = await this.tokens.authenticateRecord(input.bearerToken);
      widen = {
        agentId: record.agentId,
        humanId: record.humanId,
        approvedAt: new Date(record.createdAt).toISOString(),
        heldScopes: await this.tokens.scopesOfAgent(record.agentId),
      };
      agentName = record.agentName;
    }
    const deviceCode = randomBytes(32).toString('base64url');
    const createdAt = this.clock.now();
    const expiresAt = createdAt + EXPIRES_IN_SECONDS * 1000;
    const flow: DeviceFlow = {
      deviceHash: hashSecret(deviceCode),
      userCode: newUserCode(),
      scopes,
      agentName,
      ...(widen ? { widen } : {}),
      createdAt,
      expiresAt,
      retainUntil: expiresAt + RETAIN_AFTER_EXPIRY_MS,
      status: 'pending',
    };
    // 20^8 codes make a clash with a held one rare; the store refuses it, and a fresh code is drawn.
    for (let attempt = 1; !(await this.store.createFlow(flow)); attempt += 1) {
      if (attempt >= 5) throw new Error('no free user code after 5 draws');
      flow.userCode = newUserCode();
    }
    this.log.debug({ scopes, widening: widen !== undefined }, 'device flow started');
    return { deviceCode, userCode: formatUserCode(flow.userCode), expiresIn: EXPIRES_IN_SECONDS, interval: INTERVAL_SECONDS, scopes };
  }

  /** The agent's poll (docs/decisions.md §3): pending, the token once, or a problem that says what to do. */
  async poll(deviceCode: string): Promise<PollResult> {
    const hash = hashSecret(deviceCode);
    const flow = await this.store.flowByDevice(hash);
    if (!flow) throw this.signupUnknown('No signup has this device code, or its token was already delivered (it is delivered once).');
    const waitMs = await this.store.admitPoll(flow, INTERVAL_SECONDS * 1000);
    if (waitMs > 0) {
      const seconds = Math.max(1, Math.ceil(waitMs / 1000));
      throw new DomainError('slow-down', { detail: `Polled again within ${INTERVAL_SECONDS} seconds.`, fields: { retry_after: seconds } });
    }
    if (flow.status === 'declined') {
      await this.store.deleteFlow(flow);
      throw new DomainError('signup-declined', { detail: 'The human declined this signup.' });
    }
    if (flow.status === 'approved') {
      // Of concurrent polls, only the one that takes the record gets the token.
      const taken = await this.store.takeFlow(hash);
      if (!taken?.grant) throw this.signupUnknown('The token of this signup was already delivered (it is delivered once).');
      const expiresIn = Math.max(0, Math.floor((taken.grant.expiresAt - this.clock.now()) / 1000));
      return { status: 'completed', grant: taken.grant, expiresIn };
    }
    if (this.clock.now() >= flow.expiresAt) {
      throw new DomainError('signup-expired', { detail: `Nobody approved the signup within ${EXPIRES_IN_SECONDS / 60} minutes.` });
    }
    return { status: 'pending' };
  }

  private signupUnknown(detail: string): DomainError {
    return new DomainError('signup-unknown', { detail });
  }

  /** One answer for every code that is not waiting, so a wrong guess tells nothing about other codes. */
  private codeUnknown(): DomainError {
    return new DomainError('user-code-unknown', {
      detail: 'No signup waits for this code: it is mistyped, it expired, or it was already answered.',
      fields: { parameter: 'user_code', expected: 'the code exactly as the agent shows it (XXXX-XXXX)' },
    });
  }

  /** The pending flow of a code a human typed. */
  private async pendingFlow(userCodeInput: string): Promise<DeviceFlow> {
    const code = normalizeUserCode(userCodeInput);
    const flow = code === undefined ? undefined : await this.store.flowByUserCode(code);
    if (!flow || flow.status !== 'pending' || this.clock.now() >= flow.expiresAt) throw this.codeUnknown();
    return flow;
  }

  /** A widening flow is the business of the human who approved the agent, and of nobody else. */
  private checkHuman(flow: DeviceFlow, human: Human): void {
    if (flow.widen && flow.widen.humanId !== human.id) {
      throw new DomainError('not-the-approver', {
        detail: `${flow.agentName} asks for more scopes for itself, and only the human who approved it can answer that.`,
      });
    }
  }

  private view(flow: DeviceFlow): FlowView {
    const { widen } = flow;
    return {
      userCode: formatUserCode(flow.userCode),
      agentName: flow.agentName,
      scopes: flow.scopes,
      ...(widen
        ? {
            widening: {
              agentId: widen.agentId,
              agentName: flow.agentName,
              approvedBy: widen.humanId,
              approvedAt: widen.approvedAt,
              heldScopes: widen.heldScopes,
            },
          }
        : {}),
    };
  }

  /** What the approval page shows for a typed code: which agent asks, and for which scopes. */
  async describe(userCodeInput: string, human: Human): Promise<FlowView> {
    const flow = await this.pendingFlow(userCodeInput);
    this.checkHuman(flow, human);
    return this.view(flow);
  }

  /**
   * Approval: write the agent to the room, mint its token (scopes frozen), and keep the token in the
   * flow for the one poll that delivers it. The flow is claimed first, so of two approvals (a double
   * click, two tabs) exactly one mints; a failure half-way withdraws the token and reopens the flow.
   */
  async approve(userCodeInput: string, human: Human): Promise<FlowView> {
    const flow = await this.pendingFlow(userCodeInput);
    this.checkHuman(flow, human);
    if (!(await this.store.transitionFlow('pending', { ...flow, status: 'approving' }))) throw this.codeUnknown();
    let minted: { token: string; record: TokenRecord } | undefined;
    try {
      let agentId: string;
      if (flow.widen) {
        agentId = flow.widen.agentId;
        minted = await this.tokens.mint({ agentId, agentName: flow.agentName, humanId: human.id, humanLabel: human.name, scopes: flow.scopes });
        // The agent record's scopes become the union of its live tokens' (docs/decisions.md §3).
        await this.tokens.syncAgent({ agentId, agentName: flow.agentName, humanLabel: human.name });
      } else {
        minted = await this.admitNewAgent({ agentName: flow.agentName, human, scopes: flow.scopes });
        agentId = minted.record.agentId;
      }
      const { token, record } = minted;
      const grant: Grant = { accessToken: token, tokenId: record.id, agentId, humanLabel: human.name, scopes: record.scopes, expiresAt: record.expiresAt };
      // Fails only when the flow lapsed meanwhile: then nobody could ever poll the token.
      if (!(await this.store.transitionFlow('approving', { ...flow, status: 'approved', grant }))) throw this.codeUnknown();
      this.log.info({ agentId, tokenId: record.id, humanId: human.id, scopes: record.scopes, widening: flow.widen !== undefined }, 'device flow approved');
      await this.remember(flow, human, true);
      return this.view(flow);
    } catch (error) {
      await this.undoApproval(flow, minted?.record);
      throw error;
    }
  }

  /**
   * What approving a new agent does, whoever approves: the agent is written to the room (which gives
   * it its id), then its token is minted with the scopes frozen. Approval and provisioning both come here.
   */
  private async admitNewAgent(input: {
    agentName: string;
    human: Human;
    scopes: Scope[];
    provisionReason?: string;
  }): Promise<{ token: string; record: TokenRecord }> {
    const { agentName, human, scopes } = input;
    const agentId = await this.room.upsertAgent({ id: '', agentName, humanLabel: human.name, humanId: human.id, scopes });
    return this.tokens.mint({
      agentId,
      agentName,
      humanId: human.id,
      humanLabel: human.name,
      scopes,
      ...(input.provisionReason === undefined ? {} : { provisionReason: input.provisionReason }),
    });
  }

  /**
   * An approval an operator gives in the name of a human who has an account, with no signup to answer:
   * load tests need many agents and no human clicks through them. The agent is made exactly as an
   * approval makes it; its token record keeps the operator's reason, so the human sees on their account
   * page that they did not approve it themselves, and can revoke it. The token is answered here, once.
   */
  async provision(input: ProvisionInput): Promise<ProvisionedAgent> {
    const scopes = checkScopes(input.scopes);
    if (input.agentName.trim() === '') {
      throw new DomainError('invalid-request', {
        detail: 'agent_name is missing.',
        fields: { parameter: 'agent_name', expected: `1 to ${AGENT_NAME_MAX} characters, at least one not white space, no control characters` },
      });
    }
    const agentName = agentNameOf(input.agentName, '');
    const reason = provisionReasonOf(input.reason);
    // White space as registration leaves it (collapsed); case and Unicode forms are the store's to fold.
    const humanName = input.humanName.trim().replace(/\s+/g, ' ');
    if (humanName === '') {
      throw new DomainError('invalid-request', {
        detail: 'human_name is missing.',
        fields: { parameter: 'human_name', expected: 'the name of a human who has an account' },
      });
    }
    const human = await this.store.humanByName(humanName);
    if (!human) {
      // Humans register themselves: an operator names a real account, never makes one up here.
      throw new DomainError('not-found', {
        detail: `No human is named ${JSON.stringify([...humanName].slice(0, HUMAN_NAME_SHOWN).join(''))} here; humans register themselves at ${this.signinUrl}.`,
        fields: { parameter: 'human_name', expected: 'the name of a human who has an account (any case)' },
      });
    }
    const { token, record } = await this.admitNewAgent({ agentName, human, scopes, provisionReason: reason });
    // The audit line of every provisioned agent; never the token.
    this.log.info(
      { agentId: record.agentId, tokenId: record.id, humanId: human.id, scopes: record.scopes, reason, caller: input.caller },
      'agent provisioned by an operator',
    );
    return { agentId: record.agentId, agentName, token, tokenId: record.id, scopes: record.scopes, human: human.name, expiresAt: record.expiresAt };
  }

  /** A half-done approval: the token nobody will receive stops working, and the human may try again. */
  private async undoApproval(flow: DeviceFlow, minted: TokenRecord | undefined): Promise<void> {
    try {
      if (minted) await this.tokens.withdraw(minted);
      await this.store.transitionFlow('approving', flow);
    } catch (error) {
      // The first failure is what the human sees; this one only explains a flow left approving until it expires.
      this.log.warn({ err: error, tokenId: minted?.id }, 'could not undo a failed approval');
    }
  }

  async decline(userCodeInput: string, human: Human): Promise<FlowView> {
    const flow = await this.pendingFlow(userCodeInput);
    this.checkHuman(flow, human);
    if (!(await this.store.transitionFlow('pending', { ...flow, status: 'declined' }))) throw this.codeUnknown();
    this.log.info({ humanId: human.id, widening: flow.widen !== undefined }, 'device flow declined');
    await this.remember(flow, human, false);
    return this.view(flow);
  }

  /** Keeps this human's answer to the link while the flow's record would last (docs/decisions.md §23). */
  private async remember(flow: DeviceFlow, human: Human, approved: boolean): Promise<void> {
    try {
      await this.store.putRecord('answer', answerKey(human.id, flow.userCode), { agentName: flow.agentName, approved, at: this.clock.now() }, flow.retainUntil);
    } catch (error) {
      // The answer stands; the link opened again would only read as unknown.
      this.log.warn({ err: error }, 'could not keep the answer to a device link');
    }
  }

  /**
   * What this human already answered to the code they typed, if they answered it: asked only after
   * the code waits for no answer, so a code nobody answered, or another human's, tells nothing.
   */
  async answerOf(userCodeInput: string, human: Human): Promise<DeviceAnswer | undefined> {
    const code = normalizeUserCode(userCodeInput);
    return code === undefined ? undefined : this.store.record('answer', answerKey(human.id, code));
  }
}
