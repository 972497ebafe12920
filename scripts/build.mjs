#!/usr/bin/env node
// `npm run build` (and so the first step of `npm start`, `npm run cluster`, `npm test`, `npm run
// bench`): the workspaces that need it compiled by one `tsc -b`, then `turbo run build`, saying
// what it does while it works. A first build compiles every workspace (15 s to a minute on 2 CPUs,
// by how busy they are); later ones come from turbo's cache in about a second.
//
// Plain JavaScript on purpose: it runs before anything is compiled. Arguments go to turbo
// (`npm start` builds `--filter=@agentroom/launcher...`: the launchers and what they need).
//
// How progress is known: `turbo run build --dry-run=json` lists the tasks, their dependencies and
// which ones the cache holds. The real run prints each task's output as one group when the task
// ends (`--log-order=grouped`), then `<task>: ERROR …` if it failed; so a group means "this
// workspace is built", and a task whose dependencies are all built is building now (turbo starts
// a task as soon as it can).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import process from 'node:process';
import { clearInterval, clearTimeout, setInterval, setTimeout } from 'node:timers';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const started = Date.now();
const args = process.argv.slice(2);

/** Seconds since start, right-aligned, for the progress lines. */
function clock() {
  return `[${String(Math.round((Date.now() - started) / 1000)).padStart(3)} s]`;
}

function say(line) {
  process.stdout.write(`${line}\n`);
}

function fail(line, code = 1) {
  process.stderr.write(`${line}\n`);
  process.exit(code);
}

// 1. Node.js as package.json's "engines" asks, before anything can fail less readably.
const engines = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).engines?.node ?? '';
const minimum = /^>=\s*(\d+(?:\.\d+){0,2})$/.exec(engines.trim())?.[1];
if (minimum !== undefined && isOlderThan(process.versions.node, minimum)) {
  fail(
    `Agent Room needs Node.js ${minimum} or newer (package.json "engines"), and this is Node.js ${process.versions.node}: run it through npm (\`npm start\`, \`npm test\`, \`npm run cluster\`), which finds or installs Node.js 24 itself, or put Node.js 24 first on PATH with \`export PATH="$(bash scripts/install-node.sh):$PATH"\` (a project-local copy from the npm registry) or \`nvm install 24\``,
  );
}

/** True when version `a` (`20.18.1`) is older than `b` (`20.19`). */
function isOlderThan(a, b) {
  const have = a.split('.').map(Number);
  const need = b.split('.').map(Number);
  for (let i = 0; i < need.length; i += 1) {
    if ((have[i] ?? 0) !== need[i]) return (have[i] ?? 0) < need[i];
  }
  return false;
}

// 2. turbo comes with `npm ci`.
const turbo = join(root, 'node_modules', '.bin', 'turbo');
if (!existsSync(turbo)) fail('turbo is not installed: run `npm ci` first, then this again');

// 3. What there is to do.
const dry = spawnSync(turbo, ['run', 'build', '--dry-run=json', ...args], { cwd: root, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
let tasks;
try {
  tasks = JSON.parse(dry.stdout).tasks.map((task) => ({
    id: task.taskId,
    name: task.package.replace(/^@agentroom\//, ''),
    directory: task.directory,
    prefix: `${task.package}:${task.task}: `,
    dependencies: task.dependencies ?? [],
    cached: task.cache?.status === 'HIT',
  }));
} catch {
  // No plan (turbo changed its output, or refused the arguments): run it plainly, as it prints.
  const plain = spawnSync(turbo, ['run', 'build', ...args], { cwd: root, stdio: 'inherit' });
  process.exit(plain.status ?? 1);
}

const toBuild = tasks.filter((task) => !task.cached);
const done = new Set(tasks.filter((task) => task.cached).map((task) => task.id));
const announced = new Map(); // task id -> when it started building
let lastPrinted = Date.now();

function print(line) {
  say(line);
  lastPrinted = Date.now();
}

/** Announces every task whose dependencies are all built: turbo is building it now. */
function announceReady() {
  for (const task of toBuild) {
    if (announced.has(task.id) || done.has(task.id)) continue;
    if (!task.dependencies.every((dependency) => done.has(dependency))) continue;
    announced.set(task.id, Date.now());
    print(`  ${clock()} building ${task.name} (${announced.size}/${toBuild.length})…`);
  }
}

if (toBuild.length > 0) {
  const cached = tasks.length - toBuild.length;
  say(
    `Build: ${toBuild.length} of ${tasks.length} workspaces to compile${cached > 0 ? ` (${cached} from turbo's cache)` : ''}; ` +
      (toBuild.length === tasks.length
        ? 'a first build takes half a minute on two free cores, a few on a busy machine; later starts reuse the cache'
        : 'this takes a few seconds to a minute'),
  );
}

// 4. Every workspace to build compiled by one `tsc -b` process first: the projects share what the
// compiler has read (Node's and the libraries' types, each other's declarations), which makes it
// about twice as fast as one compiler per workspace, even two at a time (12 s against 26 s on two
// cores for all of them). turbo's tasks then find their projects up to date and do the rest (the
// proto types first, which tsc needs, then the browser bundle and the API reference's assets),
// and keep it all in their cache as before. A failure here is reported as the build's.
if (toBuild.length > 1) {
  restoreCached();
  await compileTogether();
}

/**
 * The cached workspaces' outputs, put back before tsc reads them: turbo restores them only in its
 * own run, after tsc, and a cache shared by git worktrees holds proto's generated types that a new
 * worktree lacks.
 */
function restoreCached() {
  const cached = tasks.filter((task) => task.cached);
  if (cached.length === 0) return;
  const filters = cached.map((task) => `--filter=${task.id.split('#')[0]}`);
  const restored = spawnSync(turbo, ['run', 'build', '--only', '--output-logs=none', ...filters], { cwd: root, encoding: 'utf8' });
  if (restored.status !== 0)
    fail(
      `${restored.stdout}${restored.stderr}\nBuild failed: restoring ${cached.map((task) => task.name).join(', ')} from turbo's cache failed (above)`,
      restored.status ?? 1,
    );
}

/** The one `tsc -b` over the workspaces to build, saying which project it is on (`--verbose`). */
async function compileTogether() {
  const proto = toBuild.find((task) => task.name === 'proto');
  if (proto !== undefined) {
    const generated = spawnSync('npm', ['run', 'generate', '--silent'], { cwd: join(root, proto.directory), encoding: 'utf8' });
    if (generated.status !== 0)
      fail(`${generated.stdout}${generated.stderr}\nBuild failed: generating the gRPC types from proto/ failed (above)`, generated.status ?? 1);
  }
  print(`  ${clock()} compiling ${toBuild.length} workspaces in one tsc process…`);
  const byTsconfig = new Map(toBuild.map((task) => [join(root, task.directory, 'tsconfig.json'), task.name]));
  const lines = [];
  const tsc = spawn(join(root, 'node_modules', '.bin', 'tsc'), ['-b', '--verbose', ...toBuild.map((task) => task.directory)], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const passOn = (signal) => tsc.kill(signal);
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, passOn);
  const onText = (chunk) => {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (line.trim() === '') continue;
      lines.push(line);
      const building = /Building project '([^']+)'/.exec(line);
      const name = building && byTsconfig.get(building[1]);
      if (name) print(`  ${clock()}   compiling ${name}…`);
    }
  };
  tsc.stdout.on('data', onText);
  tsc.stderr.on('data', onText);
  const code = await new Promise((resolve) => tsc.once('close', (status, signal) => resolve(status ?? signal)));
  for (const signal of ['SIGINT', 'SIGTERM']) process.off(signal, passOn);
  if (code !== 0) {
    // The compiler's messages, without --verbose's own lines (`4:40:05 AM - Building project …`, or `[4:40:05 AM] …` on a terminal).
    const chatter = /^(\[[^\]]+\]|\d{1,2}:\d{2}:\d{2}(\s?[AP]M)?\s+-)\s*(Projects in this build|Project '|Building project|Updating )/;
    process.stdout.write(`${lines.filter((line) => !chatter.test(line) && !/^\s+\* /.test(line)).join('\n')}\n`);
    fail(
      `Build failed after ${((Date.now() - started) / 1000).toFixed(1)} s (tsc exit ${code}): the compiler's messages are above; fix them and run this again`,
      typeof code === 'number' ? code : 1,
    );
  }
  print(`  ${clock()} compiled; each workspace's other steps follow, and turbo keeps the result in its cache`);
}
announceReady();

// 5. The build itself, stdout and stderr in one pipe so turbo's lines keep their order. Its
// output is kept, and shown only when it fails.
const output = [];
const child = spawn('sh', ['-c', '"$0" "$@" 2>&1', turbo, 'run', 'build', '--ui=stream', '--log-order=grouped', '--output-logs=full', ...args], {
  cwd: root,
  stdio: ['ignore', 'pipe', 'inherit'],
});
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));

const failed = new Set();
/** The task whose group is being printed: it has ended; a failure is said right after its group. */
let ending;
let endingTimer;

function settle(task, ok) {
  clearTimeout(endingTimer);
  if (ending === task) ending = undefined;
  done.add(task.id);
  if (!ok) {
    failed.add(task.id);
    print(`  ${clock()} ${task.name} failed`);
    return;
  }
  const since = announced.get(task.id);
  if (since !== undefined) print(`  ${clock()} built ${task.name} in ${Math.round((Date.now() - since) / 1000)} s`);
  else if (!task.cached) print(`  ${clock()} built ${task.name}`);
  announceReady();
}

function onLine(line) {
  const plain = line.replace(/\x1b\[[0-9;]*m/g, ''); // eslint-disable-line no-control-regex
  output.push(plain);
  // `<package>#build:  ERROR  command … exited (1)`: that task failed (said right after its group).
  const failure = tasks.find((task) => plain.startsWith(`${task.id}:`) && /\bERROR\b/.test(plain));
  if (failure !== undefined) {
    if (!failed.has(failure.id)) settle(failure, false);
    return;
  }
  if (ending !== undefined && !plain.startsWith(ending.prefix)) settle(ending, true);
  const task = tasks.find((candidate) => plain.startsWith(candidate.prefix));
  if (task === undefined || done.has(task.id)) return;
  // A group's lines come in one burst; a quiet moment after them, with no ERROR line, means success.
  ending = task;
  clearTimeout(endingTimer);
  endingTimer = setTimeout(() => settle(task, true), 300);
}

let buffer = '';
child.stdout.setEncoding('utf8');
child.stdout.on('data', (chunk) => {
  buffer += chunk;
  let newline = buffer.indexOf('\n');
  while (newline >= 0) {
    onLine(buffer.slice(0, newline));
    buffer = buffer.slice(newline + 1);
    newline = buffer.indexOf('\n');
  }
});
child.stdout.on('end', () => buffer && onLine(buffer));

// Nothing said for a while: say what is still being built.
const heartbeat = setInterval(() => {
  if (Date.now() - lastPrinted < 15_000) return;
  const building = toBuild.filter((task) => announced.has(task.id) && !done.has(task.id)).map((task) => task.name);
  if (building.length > 0) print(`  ${clock()} still building ${building.join(', ')}…`);
}, 1_000);

child.on('close', (code, signal) => {
  clearInterval(heartbeat);
  if (ending !== undefined) settle(ending, code === 0);
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  if (code === 0) {
    say(toBuild.length === 0 ? `Build: up to date (${tasks.length} workspaces from turbo's cache, ${seconds} s)` : `Build: done in ${seconds} s`);
    return;
  }
  // What the failed tasks printed (everything turbo said when that is not known), then what to do.
  const shown =
    failed.size === 0
      ? output
      : output.filter((line) => [...failed].some((id) => line.startsWith(tasks.find((task) => task.id === id).prefix) || line.startsWith(`${id}:`)));
  process.stdout.write(`${shown.join('\n')}\n`);
  fail(`Build failed after ${seconds} s (turbo ${signal ?? `exit ${code}`}): the compiler's messages are above; fix them and run this again`, code ?? 1);
});
