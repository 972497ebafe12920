// How the journeys record their checks: every rule decided first, then handed to k6's check() as
// a verdict, never as a function for check() to call.
//
// k6's check() calls each function in turn and records its result at once. A function that does
// not return, because the run stopped while it ran, is recorded as failed: a breakpoint run that
// crosses its abortOnFail threshold interrupts every VU, and a VU that was inside a check's function
// at that moment records that check failed although the answer it judged was whole (k6 v1.8: its
// Check counts a function that threw as false, and the interrupt throws). A breakpoint run through
// Envoy counted 7 first pages of the room as "not a page of posts, newest first" this way, with no
// failed request. With the verdicts decided before check(), an iteration the run interrupts stops
// before it records anything, and check() runs no code of ours it could interrupt.
import { check } from 'k6';

/**
 * Decides each rule of `rules` (name → function of `subject`), then records them all with k6's
 * `check`, tagged with `journey`. Returns whether every rule held, as `check` does.
 */
export function judge(subject, rules, journey) {
  const verdicts = {};
  for (const [name, rule] of Object.entries(rules)) verdicts[name] = Boolean(rule(subject));
  return check(subject, verdicts, { journey });
}
