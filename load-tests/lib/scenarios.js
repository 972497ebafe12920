// Executors the scenario files are built from, all open models (arrival rate): k6 starts iterations
// at the planned rate whether or not the target keeps up, so a slow target shows as latency and
// dropped iterations instead of quietly lowering the load as a closed model (fixed VUs) would.
// Also what a plan amounts to, in iterations per journey, for setup()'s quota checks.
import { seconds } from './env.js';
import { JOURNEYS } from './journeys.js';

/** `rate` iterations per second of `exec`, for `duration`. */
export function steady({ exec, rate, duration, timeUnit = '1s', preAllocatedVUs, maxVUs }) {
  return {
    executor: 'constant-arrival-rate',
    exec,
    rate,
    timeUnit,
    duration,
    preAllocatedVUs: preAllocatedVUs ?? Math.max(2, Math.ceil(rate / 2)),
    maxVUs: maxVUs ?? Math.max(10, rate * 5),
  };
}

/** Iterations per second of `exec` going from `startRate` through `stages` ({target, duration}, linear in between). */
export function ramping({ exec, startRate, stages, preAllocatedVUs, maxVUs }) {
  const peak = Math.max(startRate, ...stages.map((stage) => stage.target));
  return {
    executor: 'ramping-arrival-rate',
    exec,
    startRate,
    timeUnit: '1s',
    stages,
    preAllocatedVUs: preAllocatedVUs ?? Math.max(2, Math.ceil(peak / 4)),
    maxVUs: maxVUs ?? Math.max(20, peak * 5),
  };
}

/** Iterations per second a ramping scenario asks for `elapsed` seconds after its start. */
export function rateAt(scenario, elapsed) {
  let rate = scenario.startRate;
  let at = 0;
  for (const stage of scenario.stages) {
    const length = seconds(stage.duration);
    if (elapsed <= at + length) return rate + ((stage.target - rate) * (elapsed - at)) / Math.max(length, 1e-9);
    at += length;
    rate = stage.target;
  }
  return rate;
}

/** Iterations a scenario starts if it runs to the end. */
function iterationsOf(scenario) {
  // k6's consolidated options leave defaults as null.
  const perSecond = 1 / seconds(scenario.timeUnit || '1s');
  if (scenario.executor === 'constant-arrival-rate') return scenario.rate * perSecond * seconds(scenario.duration);
  if (scenario.executor === 'ramping-arrival-rate') {
    let total = 0;
    let rate = scenario.startRate;
    for (const stage of scenario.stages) {
      total += ((rate + stage.target) / 2) * perSecond * seconds(stage.duration);
      rate = stage.target;
    }
    return total;
  }
  throw new Error(
    `no estimate for the ${scenario.executor} executor: the scenario files use arrival-rate executors (do not override them with --vus, --duration or --iterations)`,
  );
}

/** Iterations per journey tag the scenarios start at most: a `mixed` scenario splits by the journeys' weights. */
export function plannedIterations(scenarios) {
  const total = JOURNEYS.reduce((sum, journey) => sum + journey.weight, 0);
  const plan = Object.fromEntries(JOURNEYS.map((journey) => [journey.tag, 0]));
  for (const scenario of Object.values(scenarios)) {
    const iterations = iterationsOf(scenario);
    const only = JOURNEYS.find((journey) => journey.exec === scenario.exec);
    for (const journey of JOURNEYS) {
      if (only) plan[journey.tag] += only === journey ? iterations : 0;
      else plan[journey.tag] += (iterations * journey.weight) / total;
    }
  }
  return plan;
}
