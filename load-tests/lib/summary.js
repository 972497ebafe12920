/* global __ENV */
// handleSummary(): the end of a run. It prints a table per journey and every threshold with its
// measured value, and writes the JSON report (REPORT_JSON, which `npm run load` sets next to the
// HTML dashboard export; load-tests/reports/<scenario>-<time>.json otherwise). Defining
// handleSummary replaces k6's own end-of-test text, whose renderer scripts cannot call, so this
// one shows what matters here: journeys, thresholds, the checks that failed.
import { BASE_URL } from './env.js';
import { JOURNEYS } from './journeys.js';

function ms(value) {
  if (typeof value !== 'number') return '-';
  return value >= 1000 ? `${(value / 1000).toFixed(2)}s` : `${value.toFixed(1)}ms`;
}

function percent(value) {
  return typeof value === 'number' ? `${(value * 100).toFixed(2)}%` : '-';
}

function pad(text, width) {
  return String(text).padEnd(width);
}

/** The value a threshold expression judged: `p(95)<300` reads p(95), `rate<0.01` the rate, `count>0` the count. */
function judged(metric, expression) {
  const statistic = /^\s*([a-z]+(?:\([\d.]+\))?)/.exec(expression)?.[1];
  if (statistic === undefined) return undefined;
  return metric.values[statistic];
}

function shown(metricName, value) {
  if (typeof value !== 'number') return '-';
  if (metricName.startsWith('http_req_duration')) return ms(value);
  if (metricName.startsWith('http_req_failed') || metricName.startsWith('checks')) return percent(value);
  return String(Math.round(value * 100) / 100);
}

/** Every threshold of the run: its metric, expression, whether it held, and the measured value. */
export function thresholdResults(data) {
  const results = [];
  for (const [metric, entry] of Object.entries(data.metrics)) {
    for (const [expression, outcome] of Object.entries(entry.thresholds ?? {})) {
      results.push({ metric, expression, ok: outcome.ok, value: judged(entry, expression) });
    }
  }
  return results.sort((a, b) => a.metric.localeCompare(b.metric) || a.expression.localeCompare(b.expression));
}

/** Per journey: requests, failed share, p95, p99, checks passed. */
function journeyRows(data) {
  const rows = {};
  for (const { tag } of JOURNEYS) {
    const metric = (name) => data.metrics[`${name}{journey:${tag}}`]?.values ?? {};
    const checks = metric('checks');
    rows[tag] = {
      requests: metric('http_reqs').count ?? 0,
      failed: metric('http_req_failed').rate,
      p95: metric('http_req_duration')['p(95)'],
      p99: metric('http_req_duration')['p(99)'],
      checks: checks.rate,
      checksPassed: checks.passes ?? 0,
      checksFailed: checks.fails ?? 0,
    };
  }
  return rows;
}

/** Checks that failed at least once, from every group. */
function failedChecks(group, found = []) {
  for (const entry of group.checks ?? []) if (entry.fails > 0) found.push({ name: entry.name, passes: entry.passes, fails: entry.fails });
  for (const child of group.groups ?? []) failedChecks(child, found);
  return found;
}

function text(scenario, data, report) {
  const lines = [''];
  const reqs = data.metrics.http_reqs?.values ?? {};
  const failed = data.metrics.http_req_failed?.values ?? {};
  const checks = data.metrics.checks?.values ?? {};
  const seconds = ((data.state?.testRunDurationMs ?? 0) / 1000).toFixed(1);
  lines.push(
    `  ${scenario} against ${BASE_URL}: ${reqs.count ?? 0} requests in ${seconds} s (${(reqs.rate ?? 0).toFixed(1)}/s), ${percent(failed.rate)} failed, checks ${percent(checks.rate)} (${checks.passes ?? 0} passed, ${checks.fails ?? 0} failed)`,
  );
  const dropped = data.metrics.dropped_iterations?.values?.count;
  if (dropped)
    lines.push(`  dropped iterations: ${dropped} (k6 had no free VU at the planned arrival rate: the target answered too slowly, or maxVUs is too low)`);
  const reached = data.metrics.target_rate?.values?.value;
  if (typeof reached === 'number') lines.push(`  arrival rate asked when the run ended: ${reached.toFixed(1)} iterations/s`);
  lines.push('', `  ${pad('journey', 17)}${pad('requests', 10)}${pad('failed', 9)}${pad('p95', 11)}${pad('p99', 11)}checks`);
  for (const [tag, row] of Object.entries(report.journeys)) {
    lines.push(`  ${pad(tag, 17)}${pad(row.requests, 10)}${pad(percent(row.failed), 9)}${pad(ms(row.p95), 11)}${pad(ms(row.p99), 11)}${percent(row.checks)}`);
  }
  lines.push('', '  thresholds');
  for (const result of report.thresholds) {
    lines.push(`  ${result.ok ? '✓' : '✗'} ${pad(result.metric, 44)} ${pad(result.expression, 14)} ${shown(result.metric, result.value)}`);
  }
  if (report.failedChecks.length > 0) {
    lines.push('', '  failed checks');
    for (const entry of report.failedChecks) lines.push(`  ✗ ${entry.name}: ${entry.fails} failed, ${entry.passes} passed`);
  }
  lines.push('', `  ${report.passed ? 'every threshold held' : `${report.thresholds.filter((t) => !t.ok).length} threshold(s) failed`}`, '');
  return lines.join('\n');
}

/** handleSummary for `scenario`: the text on stdout, the JSON report on disk. */
export function summarize(scenario, data) {
  const thresholds = thresholdResults(data);
  const report = {
    scenario,
    target: BASE_URL,
    finishedAt: new Date().toISOString(),
    passed: thresholds.every((t) => t.ok),
    thresholds,
    journeys: journeyRows(data),
    failedChecks: failedChecks(data.root_group ?? {}),
    k6: data,
  };
  const path = __ENV.REPORT_JSON || `load-tests/reports/${scenario}-${report.finishedAt.replace(/[:.]/g, '-')}.json`;
  return { stdout: text(scenario, data, report), [path]: JSON.stringify(report, null, 2) };
}
