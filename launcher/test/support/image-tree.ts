/**
 * Rebuilds the image's runtime file tree in a temporary folder, from this repository as
 * `npm run build` left it, following the runtime stage's COPY and `npm ci` lines in order. What
 * the Dockerfile copies from the build stage comes from the repository's built files; what it
 * copies from the build context must not be left out by .dockerignore.
 */
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, relative } from 'node:path';
import type { CopyStep, RuntimeImage } from './image-dockerfile.js';

/** The uid and gid of the image's `node` user. */
export const IMAGE_USER = { uid: 1000, gid: 1000 } as const;

/**
 * Spawn options that run a process as the image's user when the tests run as root (root writes
 * through any file mode); a non-root test user is already held by the modes.
 */
export function asImageUser(): { uid?: number; gid?: number } {
  return process.getuid?.() === 0 ? { ...IMAGE_USER } : {};
}

export interface RuntimeTree {
  /** The folder that stands for the image's WORKDIR. */
  root: string;
  /** How long `npm ci` took, in milliseconds. */
  installMs: number;
  remove(): void;
}

function copy(repo: string, root: string, step: CopyStep, ignored: (path: string) => boolean): void {
  for (const source of step.sources) {
    const from = join(repo, source);
    if (step.from === 'context' && ignored(source)) throw new Error(`Dockerfile line ${step.line}: ${source} is left out of the build context by .dockerignore`);
    if (!existsSync(from)) {
      throw new Error(`Dockerfile line ${step.line}: ${source} does not exist${step.from === 'context' ? '' : ' (run npm run build: the build stage makes it)'}`);
    }
    const folder = statSync(from).isDirectory();
    const to = step.dest.endsWith('/') && !folder ? join(root, step.dest, basename(source)) : join(root, step.dest);
    if (folder) {
      // A folder's contents go into the destination; from the context, without what is ignored.
      const filter = step.from === 'context' ? (path: string) => !ignored(relative(repo, path)) : () => true;
      cpSync(from, to, { recursive: true, filter });
    } else {
      mkdirSync(join(to, '..'), { recursive: true });
      copyFileSync(from, to);
    }
  }
}

/** `npm ci` with the Dockerfile's flags (and the machine's warm cache), in `root`. */
function npmCi(root: string, flags: string[], line: number): Promise<void> {
  // Settings of an npm that started these tests (npm_config_*) must not reach this install.
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.toLowerCase().startsWith('npm_')));
  return new Promise((resolve, reject) => {
    const child = spawn('npm', ['ci', ...flags, '--prefer-offline'], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code) => {
      if (code === 0) resolve();
      else reject(new Error(`Dockerfile line ${line}: npm ci ${flags.join(' ')} failed (exit ${code}):\n${output.trim().split('\n').slice(-15).join('\n')}`));
    });
  });
}

/**
 * Assembles the runtime tree, then makes all of it read-only: a service that needs to write
 * under its WORKDIR fails to start from it, as it would on a read-only root filesystem.
 */
export async function assembleRuntimeTree(repo: string, image: RuntimeImage, ignored: (path: string) => boolean): Promise<RuntimeTree> {
  const root = mkdtempSync(join(tmpdir(), 'agentroom-image-'));
  // The image's user must be able to enter it, as it can enter /app.
  chmodSync(root, 0o755);
  const remove = (): void => {
    // Root removes read-only files as they are; another user gives its folders write access back first.
    if (process.getuid?.() !== 0) spawnSync('find', [root, '-type', 'd', '-exec', 'chmod', 'u+w', '{}', '+']);
    rmSync(root, { recursive: true, force: true });
  };
  let installMs = 0;
  try {
    for (const step of image.steps) {
      if (step.kind === 'copy') {
        copy(repo, root, step, ignored);
      } else {
        const started = performance.now();
        await npmCi(root, step.flags, step.line);
        installMs += performance.now() - started;
      }
    }
    const locked = spawnSync('chmod', ['-R', 'a-w', root], { encoding: 'utf8' });
    if (locked.status !== 0) throw new Error(`chmod -R a-w failed: ${locked.stderr}`);
  } catch (error) {
    remove();
    throw error;
  }
  return { root, installMs, remove };
}
