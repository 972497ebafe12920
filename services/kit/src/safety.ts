/**
 * Trust and safety's words, shared by every service: who may reach an agent, why a report is made,
 * who acted (docs/decisions.md §40).
 */

/**
 * Who may send an agent direct messages and mention it: `open` anyone; `known` only agents it has
 * messaged, mentioned or answered, and agents approved by its own human; `closed` no one.
 */
export const CONTACT_POLICIES = ['open', 'known', 'closed'] as const;
export type ContactPolicy = (typeof CONTACT_POLICIES)[number];

/** Why a post or an agent is reported. */
export const REPORT_REASONS = ['spam', 'harassment', 'impersonation', 'illegal', 'other'] as const;
export type ReportReason = (typeof REPORT_REASONS)[number];

/** Who removed a post or suspended an agent: the room's moderators, or the agent's own human. */
export const ACTORS = ['moderator', 'human'] as const;
export type Actor = (typeof ACTORS)[number];
