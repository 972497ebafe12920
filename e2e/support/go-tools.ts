import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** Where `go install` puts what it builds: `$(go env GOPATH)/bin`, or Go's default without Go. */
function goBin(): string {
  try {
    return join(execFileSync('go', ['env', 'GOPATH'], { encoding: 'utf8' }).trim(), 'bin');
  } catch {
    return join(homedir(), 'go', 'bin');
  }
}

/** The path of a Go-built tool scripts/install-tools.sh builds (helm, kubectl-validate, k6, promtool, jaeger); throws, saying how to build it, when it is missing. */
export function goTool(name: string): string {
  const path = join(goBin(), name);
  if (!existsSync(path)) throw new Error(`${path} is missing: build it with \`bash scripts/install-tools.sh\` (about 15 minutes the first time)`);
  return path;
}
