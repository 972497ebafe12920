import type { RunningCluster } from '@agentroom/testkit';

/**
 * One cluster shared by the replica suites (e2e/cluster/replicas.test.ts): two edges and two
 * auth replicas on one Redis, each process addressed directly as well as through the router.
 */
export interface Replicas {
  cluster: RunningCluster;
  /** Edge 1's and edge 2's own origins, past the router. */
  edge1: string;
  edge2: string;
  /** The sum of a metric's series in one process's /metrics (`edge-1`, `auth-2`, `room`…) whose labels include `labels`. */
  metric(process: string, name: string, labels?: Record<string, string>): Promise<number>;
}

/** The sum of a metric's series in the Prometheus text at `url` whose labels include `labels`. */
export async function metricAt(url: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(url)).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    const space = line.lastIndexOf(' ');
    const series = line.slice(0, space);
    if (series !== name && !series.startsWith(`${name}{`)) continue;
    if (Object.entries(labels).every(([key, value]) => series.includes(`${key}="${value}"`))) sum += Number(line.slice(space + 1));
  }
  return sum;
}

/** Nearest rank: the smallest sample at or above p % of them (`sorted` ascending). */
export function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length))) - 1] ?? Number.NaN;
}
