import { freePort } from '@agentroom/kit/local';
import { serviceClient } from '@agentroom/kit/grpc';
import { createLogger } from '@agentroom/kit/log';
import { DomainError } from '@agentroom/kit/problems';
import type { Clock } from '@agentroom/kit/store';
import { type ServiceProcess, startServiceProcess } from '@agentroom/testkit';
import { messagingProto, recordProto } from '@agentroom/proto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { grantModerators } from '../src/index.js';
import { Humans } from '../src/humans.js';
import { RoomGateway } from '../src/room.gateway.js';
import { Safety } from '../src/safety.js';
import { MemoryAuthStore } from '../src/store-memory.js';

const env = { SITE_URL: 'http://room.test', LOG_LEVEL: 'silent', SHUTDOWN_GRACE_MS: '1000' } as const;

/** The room and the record (PGlite in memory), their own processes, as auth meets them: over gRPC. */
let room: ServiceProcess;
let record: ServiceProcess;
let nowhere: string;
let time = Date.parse('2026-11-22T12:00:00Z');
const clock: Clock = { now: () => time };

beforeAll(async () => {
  room = await startServiceProcess({ service: 'room', addressVariable: 'ROOM_GRPC_ADDR', env });
  record = await startServiceProcess({ service: 'record', addressVariable: 'RECORD_GRPC_ADDR', env: { ...env, ROOM_ADDR: room.address } });
  // A port nothing listens on: a service that is down.
  nowhere = `127.0.0.1:${await freePort()}`;
}, 30_000);

afterAll(async () => {
  await record.stop();
  await room.stop();
});

function safetyWith(store: MemoryAuthStore, recordAddress: string): { safety: Safety; close(): void } {
  const gateway = new RoomGateway(room.address, 2_000);
  const messaging = serviceClient(messagingProto().MessagingService, nowhere, { deadlineMs: 500 });
  const recordClient = serviceClient(recordProto().RecordService, recordAddress, { deadlineMs: 1_000 });
  return {
    safety: new Safety({ store, room: gateway, messaging, record: recordClient, clock }),
    close() {
      gateway.close();
      messaging.close();
      recordClient.close();
    },
  };
}

async function problem(promise: Promise<unknown>): Promise<DomainError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof DomainError) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

describe('Safety: suspensions, each audited in the record', () => {
  let store: MemoryAuthStore;
  let agentId: string;

  beforeEach(() => {
    time += 60_000;
    store = new MemoryAuthStore(clock);
    agentId = `a_safety${Math.random().toString(36).slice(2, 10)}`;
  });

  it('suspends and resumes as the human; each action is an entry of the audit, not in the public log', async () => {
    const { safety, close } = safetyWith(store, record.address);
    try {
      const made = await safety.suspend(agentId, { by: 'human', actorId: 'h_ada', reason: '  runaway loop ', until: time + 3_600_000 });
      expect(made).toEqual({ agentId, by: 'human', actorId: 'h_ada', reason: 'runaway loop', since: time, until: time + 3_600_000 });
      expect(await safety.suspensionOf(agentId)).toEqual(made);
      expect(await safety.resume(agentId, { by: 'human', actorId: 'h_ada' })).toBe(true);
      expect(await safety.resume(agentId, { by: 'human', actorId: 'h_ada' })).toBe(false);
      const recordClient = serviceClient(recordProto().RecordService, record.address);
      const { entries } = await recordClient.call('listAudit', { agentId, publicOnly: false, limit: 10, cursor: '' });
      recordClient.close();
      expect(entries.map((entry) => [entry.action, entry.actorKind, entry.actorId, entry.public])).toEqual([
        ['resume_agent', 'human', 'h_ada', false],
        ['suspend_agent', 'human', 'h_ada', false],
      ]);
      expect(JSON.parse(entries[1]?.detail ?? '{}')).toEqual({ until: new Date(time + 3_600_000).toISOString() });
    } finally {
      close();
    }
  });

  it("acts as a moderator only for a moderator, whose suspension the agent's human neither replaces nor lifts", async () => {
    const { safety, close } = safetyWith(store, record.address);
    try {
      expect((await problem(safety.suspend(agentId, { by: 'moderator', actorId: 'h_grace', reason: 'spam' }))).slug).toBe('moderator-required');
      await store.setModerator('h_grace', true);
      await safety.suspend(agentId, { by: 'moderator', actorId: 'h_grace', reason: 'spam' });
      expect((await problem(safety.suspend(agentId, { by: 'human', actorId: 'h_ada', reason: 'mine' }))).slug).toBe('moderator-required');
      expect((await problem(safety.resume(agentId, { by: 'human', actorId: 'h_ada' }))).slug).toBe('moderator-required');
      expect(await safety.suspensionOf(agentId)).toMatchObject({ by: 'moderator', reason: 'spam' });
    } finally {
      close();
    }
  });

  it('refuses a suspension without a reason, or one that ends in the past, and stores nothing', async () => {
    const { safety, close } = safetyWith(store, record.address);
    try {
      expect((await problem(safety.suspend(agentId, { by: 'human', actorId: 'h_ada', reason: ' ' }))).fields.parameter).toBe('reason');
      expect((await problem(safety.suspend(agentId, { by: 'human', actorId: 'h_ada', reason: 'x', until: time }))).fields.parameter).toBe('until');
      expect((await problem(safety.suspend(agentId, { by: 'human', actorId: 'h_ada', reason: 'a\u0007b' }))).fields.parameter).toBe('reason');
      expect(await safety.suspensionOf(agentId)).toBeUndefined();
    } finally {
      close();
    }
  });

  it('answers unavailable when the audit cannot be written, and the suspension stands', async () => {
    const { safety, close } = safetyWith(store, nowhere);
    try {
      const refused = await problem(safety.suspend(agentId, { by: 'human', actorId: 'h_ada', reason: 'runaway loop' }));
      expect(refused.slug).toBe('unavailable');
      expect(refused.detail).toContain('do it again to record it');
      expect(await safety.suspensionOf(agentId)).toMatchObject({ reason: 'runaway loop' });
    } finally {
      close();
    }
  });
});

describe("AUTH_MODERATORS (the chart's auth.moderators), applied at start", () => {
  it('grants the role to each named human, whatever the case; skips a name nobody has; takes it from nobody', async () => {
    const store = new MemoryAuthStore(clock);
    const humans = new Humans({ store, clock, passwordHashCost: 1024 });
    const ada = await humans.register('Ada Lovelace', 'correct horse');
    const grace = await humans.register('Grace Hopper', 'battery staple');
    await store.setModerator(grace.id, true);
    await grantModerators(humans, ['ada lovelace', 'Nobody Yet'], createLogger('auth', 'silent'));
    expect((await humans.moderators()).map((human) => human.name)).toEqual(['Ada Lovelace', 'Grace Hopper']);
    expect(await humans.isModerator(ada.id)).toBe(true);
  });
});
