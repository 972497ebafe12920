import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';

/** Where `go install` puts what it builds: `$(go env GOPATH)/bin`, or Go's default without Go. */
function goBin(): string {
  try {
    return join(execFileSync('go', ['env', 'GOPATH'], { encoding: 'utf8' }).trim(), 'bin');
  } catch {
    return join(homedir(), 'go', 'bin');
  }
}

const INSTALL = 'build it with `bash scripts/install-tools.sh` (about 15 minutes the first time)';

/** The path of a Go-built tool scripts/install-tools.sh builds (helm, kubectl-validate, k6, promtool, jaeger); throws, saying how to build it, when it is missing. */
export function goTool(name: string): string {
  const path = join(goBin(), name);
  if (!existsSync(path)) throw new Error(`${path} is missing: ${INSTALL}`);
  return path;
}

/** The Prometheus Operator release whose CRDs the chart's objects are checked against (the one scripts/install-tools.sh fetches). */
export const PROMETHEUS_OPERATOR = 'github.com/prometheus-operator/prometheus-operator@v0.85.0';

/**
 * The folder of the Prometheus Operator's own CRDs (ServiceMonitor, PrometheusRule, ...) in the Go
 * module cache, for kubectl-validate's `--local-crds`; throws, saying how to fetch them, when the
 * module is not there. GOPROXY=off: a test reads the cache, it never downloads.
 */
export function prometheusOperatorCrds(): string {
  let dir: string | undefined;
  try {
    const out = execFileSync('go', ['mod', 'download', '-json', PROMETHEUS_OPERATOR], {
      encoding: 'utf8',
      cwd: tmpdir(),
      env: { ...process.env, GOPROXY: 'off' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    dir = z.object({ Dir: z.string() }).parse(JSON.parse(out)).Dir;
  } catch (error) {
    throw new Error(`${PROMETHEUS_OPERATOR} is not in the Go module cache: ${INSTALL}`, { cause: error });
  }
  const crds = join(dir, 'example/prometheus-operator-crd');
  if (!existsSync(join(crds, 'monitoring.coreos.com_prometheusrules.yaml'))) throw new Error(`${crds} holds no PrometheusRule CRD: ${INSTALL}`);
  return crds;
}
