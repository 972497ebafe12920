/**
 * Rebuilds the image's runtime file tree in a temporary folder, from this repository as
 * `npm run build` left it, following the runtime stage's COPY and `npm ci` lines in order. What
 * the Dockerfile copies from the build stage comes from the repository's built files; what it
 * copies from the build context must not be left out by .dockerignore.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash, type Hash } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  cpSync,
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, delimiter, dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CopyStep, NpmCiStep, RuntimeImage } from './image-dockerfile.js';

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
  /**
   * The folder that stands for the base image's /usr/local/bin: the Node.js running these tests,
   * put where the image's user can run it (see `stageNode`). The services' PATH starts with it.
   */
  nodeBin: string;
  /** How long `npm ci` took, in milliseconds (or copying its layer from the cache). */
  installMs: number;
  /** Whether the `npm ci` layer came from the layer cache, as `docker build` reuses it when nothing before it changed. */
  cached: boolean;
  remove(): void;
}

/**
 * The layer cache: the tree as it stood after an `npm ci` step, kept under the hash of everything
 * that made it (each earlier step, the bytes it copied, the step's flags, the Node.js and npm that
 * ran it). It is Docker's own rule for reusing a RUN layer: the same instruction over the same
 * files gives the same layer. A changed lockfile, package.json or flag makes a new key, and the
 * install runs again. Only the newest layer is kept. `IMAGE_LAYER_CACHE=0` turns it off.
 */
const LAYER_CACHE = fileURLToPath(new URL('../../node_modules/.cache/agentroom-image-layers/', import.meta.url));
const LAYER_CACHE_ON = process.env.IMAGE_LAYER_CACHE !== '0';

/** Adds a copy step and every byte it copies to `hash`. */
function hashCopy(hash: Hash, repo: string, step: CopyStep): void {
  hash.update(JSON.stringify({ from: step.from, sources: step.sources, dest: step.dest }));
  const add = (path: string): void => {
    if (statSync(path).isDirectory()) {
      for (const entry of readdirSync(path).sort()) add(join(path, entry));
    } else {
      hash.update(`\0${relative(repo, path)}\0`).update(readFileSync(path));
    }
  };
  for (const source of step.sources) if (existsSync(join(repo, source))) add(join(repo, source));
}

/** The version of the `npm` on PATH, which the layer depends on as much as on its flags. */
function npmVersion(): string {
  return spawnSync('npm', ['--version'], { encoding: 'utf8' }).stdout.trim();
}

function copy(repo: string, root: string, step: CopyStep, ignored: (path: string) => boolean): void {
  for (const source of step.sources) {
    const from = join(repo, source);
    if (step.from === 'context' && ignored(source))
      throw new Error(`Dockerfile line ${step.line}: ${source} is left out of the build context by .dockerignore`);
    if (!existsSync(from)) {
      throw new Error(
        `Dockerfile line ${step.line}: ${source} does not exist${step.from === 'context' ? '' : ' (run npm run build: the build stage makes it)'}`,
      );
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
  // Settings of an npm that started these tests (npm_config_*) must not reach this install; npm
  // runs on the Node.js running the tests, so the tree is installed (engines checked) for it.
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.toLowerCase().startsWith('npm_')));
  env.PATH = `${dirname(process.execPath)}${delimiter}${env.PATH ?? ''}`;
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
 * The Node.js running these tests, in a folder of its own that the image's user can enter, as the
 * base image holds its Node.js in /usr/local/bin: the project's Node.js often lies in the checkout
 * (.tools/node24, from scripts/install-node.sh), and a checkout under a folder only its owner enters
 * (root's home, a `mktemp -d`) would leave the image's user to find another node on PATH, or none.
 * Hard-linked where it can be (the same file, no copy), its bytes copied otherwise.
 */
function stageNode(): { bin: string; folder: string } {
  const folder = mkdtempSync(join(tmpdir(), 'agentroom-image-node-'));
  const bin = join(folder, 'bin');
  mkdirSync(bin);
  for (const path of [folder, bin]) chmodSync(path, 0o755);
  const node = join(bin, 'node');
  try {
    linkSync(process.execPath, node);
  } catch {
    copyFileSync(process.execPath, node);
    chmodSync(node, 0o755);
  }
  return { bin, folder };
}

/**
 * Assembles the runtime tree, then makes all of it read-only: a service that needs to write
 * under its WORKDIR fails to start from it, as it would on a read-only root filesystem.
 */
export async function assembleRuntimeTree(repo: string, image: RuntimeImage, ignored: (path: string) => boolean): Promise<RuntimeTree> {
  const root = mkdtempSync(join(tmpdir(), 'agentroom-image-'));
  // The image's user must be able to enter it, as it can enter /app.
  chmodSync(root, 0o755);
  const node = stageNode();
  const remove = (): void => {
    // Root removes read-only files as they are; another user gives its folders write access back first.
    if (process.getuid?.() !== 0) spawnSync('find', [root, '-type', 'd', '-exec', 'chmod', 'u+w', '{}', '+']);
    rmSync(root, { recursive: true, force: true });
    rmSync(node.folder, { recursive: true, force: true });
  };
  let installMs = 0;
  let cached = false;
  const layers = createHash('sha256').update(`${process.version} npm ${npmVersion()}`);
  try {
    // What is copied after the last install makes no layer of ours: it is not hashed.
    const lastInstall = image.steps.map((step) => step.kind).lastIndexOf('npm-ci');
    for (const [index, step] of image.steps.entries()) {
      if (step.kind === 'copy') {
        copy(repo, root, step, ignored);
        if (index < lastInstall) hashCopy(layers, repo, step);
      } else {
        const started = performance.now();
        cached = (await npmCiLayer(root, step, layers)) || cached;
        installMs += performance.now() - started;
      }
    }
    const locked = spawnSync('chmod', ['-R', 'a-w', root], { encoding: 'utf8' });
    if (locked.status !== 0) throw new Error(`chmod -R a-w failed: ${locked.stderr}`);
  } catch (error) {
    remove();
    throw error;
  }
  return { root, nodeBin: node.bin, installMs, cached, remove };
}

/**
 * An `npm ci` step: its layer from the cache when the same steps over the same files made one,
 * otherwise the install, whose result is then kept. Answers whether the cache served it.
 */
async function npmCiLayer(root: string, step: NpmCiStep, layers: Hash): Promise<boolean> {
  layers.update(`npm ci ${step.flags.join(' ')}`);
  const key = layers.copy().digest('hex').slice(0, 32);
  const layer = join(LAYER_CACHE, key);
  if (LAYER_CACHE_ON && existsSync(join(layer, '.complete'))) {
    // The layer holds what the earlier steps copied, byte for byte (they are in its key), and the install.
    for (const entry of readdirSync(root)) rmSync(join(root, entry), { recursive: true, force: true });
    copyTree(join(layer, 'tree'), root);
    return true;
  }
  await npmCi(root, step.flags, step.line);
  if (LAYER_CACHE_ON) {
    // Written aside and renamed, so a run stopped half-way (or another worker) never sees half a layer.
    const partial = `${layer}.${process.pid}.partial`;
    rmSync(LAYER_CACHE, { recursive: true, force: true });
    mkdirSync(partial, { recursive: true });
    copyTree(root, join(partial, 'tree'));
    mkdirSync(join(partial, '.complete'));
    renameSync(partial, layer);
  }
  return false;
}

/**
 * The tree at `from` into `to` (empty), its files hard-linked: 40,000 files of node_modules in a second or
 * two, where copying their bytes takes a quarter of a minute. The layer and the trees made from it
 * share their files, which nothing writes to (the tree is made read-only, as the image runs it).
 * Across filesystems, where links cannot go, the bytes are copied.
 */
function copyTree(from: string, to: string): void {
  mkdirSync(to, { recursive: true });
  const linked = spawnSync('cp', ['-al', `${from}/.`, to], { encoding: 'utf8' });
  if (linked.status === 0) return;
  for (const entry of readdirSync(to)) rmSync(join(to, entry), { recursive: true, force: true });
  const copied = spawnSync('cp', ['-a', `${from}/.`, to], { encoding: 'utf8' });
  if (copied.status !== 0) throw new Error(`cp -a ${from} ${to} failed: ${copied.stderr}`);
}
