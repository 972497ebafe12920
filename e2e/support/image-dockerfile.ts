/**
 * Reads the repository's Dockerfile and .dockerignore the way `docker build` would, for the forms
 * the image uses, so a test can rebuild the runtime stage's file tree without a Docker engine.
 * Strict on purpose: an instruction, flag or syntax it does not know throws with its line, so a
 * new form in the Dockerfile fails the test until this reader (and the tree it builds) learns it,
 * instead of being silently left out of the check.
 */
import { posix } from 'node:path';

export interface Instruction {
  keyword: string;
  args: string;
  /** 1-based line of the instruction's first line, for error messages. */
  line: number;
}

export class DockerfileError extends Error {
  override readonly name = 'DockerfileError';
}

function fail(instruction: Instruction, why: string): never {
  throw new DockerfileError(`Dockerfile line ${instruction.line} (${instruction.keyword} ${instruction.args.slice(0, 60)}): ${why}`);
}

/** Logical instructions: comments dropped, `\` continuations joined. */
export function readInstructions(text: string): Instruction[] {
  const instructions: Instruction[] = [];
  let pending: { text: string; line: number } | undefined;
  text.split('\n').forEach((raw, index) => {
    const trimmed = raw.trim();
    // Comment lines are dropped, even inside a continued instruction (as Docker does).
    if (trimmed.startsWith('#')) return;
    if (trimmed === '' && pending === undefined) return;
    const continued = trimmed.endsWith('\\');
    const part = continued ? trimmed.slice(0, -1).trim() : trimmed;
    pending = pending === undefined ? { text: part, line: index + 1 } : { text: `${pending.text} ${part}`.trim(), line: pending.line };
    if (continued) return;
    if (pending.text.includes('<<')) throw new DockerfileError(`Dockerfile line ${pending.line}: here-documents are not understood`);
    const match = /^([A-Za-z]+)\s+(.*)$/s.exec(pending.text);
    if (match === null) throw new DockerfileError(`Dockerfile line ${pending.line}: not an instruction: ${pending.text}`);
    instructions.push({ keyword: (match[1] as string).toUpperCase(), args: (match[2] as string).trim(), line: pending.line });
    pending = undefined;
  });
  if (pending !== undefined) throw new DockerfileError(`Dockerfile line ${pending.line}: ends inside a continued instruction`);
  return instructions;
}

export interface Stage {
  /** The name after AS, if any. */
  name: string | undefined;
  /** What FROM names: an image reference, or an earlier stage's name. */
  from: string;
  instructions: Instruction[];
}

export function readStages(instructions: Instruction[]): Stage[] {
  const stages: Stage[] = [];
  for (const instruction of instructions) {
    if (instruction.keyword === 'FROM') {
      const match = /^(\S+)(?:\s+AS\s+([a-z][a-z0-9_.-]*))?$/i.exec(instruction.args);
      if (match === null || instruction.args.includes('--')) fail(instruction, 'only `FROM <image> [AS <name>]` is understood');
      stages.push({ name: match[2], from: match[1] as string, instructions: [] });
      continue;
    }
    const stage = stages.at(-1);
    if (stage === undefined) fail(instruction, 'instructions before the first FROM are not understood');
    stage.instructions.push(instruction);
  }
  return stages;
}

/** A file or folder copied into the image, as the runtime stage says. */
export interface CopyStep {
  kind: 'copy';
  /** `context`: the build context (the repository less .dockerignore); otherwise the stage named. */
  from: 'context' | { stage: string };
  /** Paths in the repository (a stage's WORKDIR prefix removed). */
  sources: string[];
  /** Destination relative to the runtime WORKDIR; ends with `/` when it is a folder. */
  dest: string;
  line: number;
}

/** `npm ci`, with the flags the Dockerfile gives it. */
export interface NpmCiStep {
  kind: 'npm-ci';
  flags: string[];
  line: number;
}

export interface RuntimeImage {
  /** The image the runtime stage is built on, following `FROM <stage>` to the first real image. */
  baseImage: string;
  /** The npm version the stages install globally, if they do. */
  npmVersion: string | undefined;
  workdir: string;
  env: Record<string, string>;
  labels: Record<string, string>;
  user: string | undefined;
  entrypoint: string[];
  cmd: string[];
  expose: number[];
  /** In order: what the runtime stage copies and installs. */
  steps: (CopyStep | NpmCiStep)[];
}

/** `KEY=value` pairs, values optionally double-quoted; `${ARG}` replaced from `args` when given. */
function keyValues(instruction: Instruction, args?: Record<string, string>): Record<string, string> {
  const pairs: Record<string, string> = {};
  const pattern = /\s*([A-Za-z_][A-Za-z0-9_.-]*)=(?:"((?:[^"\\]|\\.)*)"|([^\s"]*))/gy;
  let match: RegExpExecArray | null;
  let end = 0;
  while ((match = pattern.exec(instruction.args)) !== null) {
    const raw = match[2] ?? match[3] ?? '';
    const value = raw.replace(/\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?/g, (_whole, name: string) => {
      if (args === undefined) fail(instruction, 'variables are not understood here');
      const arg = args[name];
      if (arg === undefined) fail(instruction, `\${${name}} is not an ARG of this stage`);
      return arg;
    });
    pairs[match[1] as string] = value.replace(/\\(.)/g, '$1');
    end = pattern.lastIndex;
  }
  if (instruction.args.slice(end).trim() !== '' || end === 0) fail(instruction, 'only KEY=value pairs are understood');
  return pairs;
}

function jsonArray(instruction: Instruction): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(instruction.args);
  } catch {
    fail(instruction, 'only the JSON (exec) form is understood');
  }
  if (!Array.isArray(parsed) || !parsed.every((item): item is string => typeof item === 'string')) fail(instruction, 'must be a JSON array of strings');
  return parsed;
}

/** RUN commands the tree builder knows: each `&&`-joined command must be one of these. */
function runCommands(instruction: Instruction): { npmCi?: string[]; npmVersion?: string } {
  if (/[;|`$<>&]/.test(instruction.args.replaceAll('&&', ' '))) fail(instruction, 'only commands joined by && are understood');
  const result: { npmCi?: string[]; npmVersion?: string } = {};
  for (const command of instruction.args.split('&&').map((part) => part.trim())) {
    const words = command.split(/\s+/);
    if (words[0] !== 'npm') fail(instruction, `\`${command}\` is not a command this test knows how to reproduce`);
    const flags = words.slice(2);
    if (words[1] === 'ci' && flags.every((flag) => /^--[a-z-]+(=[\w.-]+)?$/.test(flag))) {
      result.npmCi = flags;
    } else if (words[1] === 'install' && flags.includes('--global') && /^npm@\d+\.\d+\.\d+$/.test(flags.at(-1) ?? '')) {
      result.npmVersion = (flags.at(-1) as string).slice('npm@'.length);
    } else if (command !== 'npm cache clean --force') {
      fail(instruction, `\`${command}\` is not a command this test knows how to reproduce`);
    }
  }
  return result;
}

/**
 * The runtime stage (the last one) with the stages it is built `FROM`, read into what the image
 * holds and how it starts. Sources copied from another stage must lie under that stage's WORKDIR,
 * and that stage must copy the whole context there (`COPY . .`): its files are then this
 * repository's, as built.
 */
export function readRuntimeImage(text: string): RuntimeImage {
  const stages = readStages(readInstructions(text));
  const byName = new Map(stages.filter((stage) => stage.name !== undefined).map((stage) => [stage.name as string, stage]));
  const runtime = stages.at(-1);
  if (runtime === undefined) throw new DockerfileError('the Dockerfile has no FROM');
  const chain: Stage[] = [];
  for (let stage: Stage | undefined = runtime; stage !== undefined; stage = byName.get(stage.from)) {
    if (chain.includes(stage)) throw new DockerfileError(`stage ${stage.name} is built FROM itself`);
    chain.unshift(stage);
  }
  const image: RuntimeImage = {
    baseImage: (chain[0] as Stage).from,
    npmVersion: undefined,
    workdir: '/',
    env: {},
    labels: {},
    user: undefined,
    entrypoint: [],
    cmd: [],
    expose: [],
    steps: [],
  };
  for (const stage of chain) {
    const args: Record<string, string> = {};
    for (const instruction of stage.instructions) {
      switch (instruction.keyword) {
        case 'ARG': {
          const match = /^([A-Za-z_][A-Za-z0-9_]*)=(\S+)$/.exec(instruction.args);
          if (match === null) fail(instruction, 'only `ARG NAME=default` is understood');
          args[match[1] as string] = match[2] as string;
          break;
        }
        case 'LABEL':
          Object.assign(image.labels, keyValues(instruction, args));
          break;
        case 'ENV':
          Object.assign(image.env, keyValues(instruction));
          break;
        case 'WORKDIR':
          if (!/^\/[\w./-]*$/.test(instruction.args)) fail(instruction, 'only an absolute WORKDIR without variables is understood');
          image.workdir = posix.normalize(instruction.args);
          break;
        case 'USER':
          image.user = instruction.args;
          break;
        case 'EXPOSE':
          image.expose.push(
            ...instruction.args.split(/\s+/).map((port) => {
              if (!/^\d+(\/tcp)?$/.test(port)) fail(instruction, `port ${port} is not understood`);
              return Number.parseInt(port, 10);
            }),
          );
          break;
        case 'ENTRYPOINT':
          image.entrypoint = jsonArray(instruction);
          break;
        case 'CMD':
          image.cmd = jsonArray(instruction);
          break;
        case 'RUN': {
          const run = runCommands(instruction);
          if (run.npmVersion !== undefined) image.npmVersion = run.npmVersion;
          if (run.npmCi !== undefined) {
            if (stage !== runtime) fail(instruction, 'npm ci is only understood in the runtime stage');
            image.steps.push({ kind: 'npm-ci', flags: run.npmCi, line: instruction.line });
          }
          break;
        }
        case 'COPY':
          if (stage !== runtime) fail(instruction, 'COPY is only understood in the runtime stage');
          image.steps.push(readCopy(instruction, image.workdir, byName));
          break;
        default:
          fail(instruction, `${instruction.keyword} is not understood by this test's reader`);
      }
    }
  }
  return image;
}

/** A stage's last WORKDIR, or the one it inherits from the stage it is built FROM. */
function workdirOf(stage: Stage, stages: Map<string, Stage>): string | undefined {
  const own = stage.instructions.filter((item) => item.keyword === 'WORKDIR').at(-1)?.args;
  if (own !== undefined) return own;
  const parent = stages.get(stage.from);
  return parent === undefined || parent === stage ? undefined : workdirOf(parent, stages);
}

function readCopy(instruction: Instruction, workdir: string, stages: Map<string, Stage>): CopyStep {
  if (instruction.args.startsWith('[')) fail(instruction, 'the JSON form of COPY is not understood');
  const words = instruction.args.split(/\s+/);
  let from: CopyStep['from'] = 'context';
  let prefix = '';
  while (words[0]?.startsWith('--')) {
    const flag = words.shift() as string;
    const match = /^--from=([a-z][a-z0-9_.-]*)$/i.exec(flag);
    if (match === null) fail(instruction, `flag ${flag} is not understood (only --from=<stage>)`);
    const stage = stages.get(match[1] as string);
    if (stage === undefined) fail(instruction, `--from names no earlier stage: ${match[1]}`);
    // The stage's WORKDIR, and proof that it holds the whole context there.
    const stageWorkdir = workdirOf(stage, stages);
    if (stageWorkdir === undefined || !stage.instructions.some((item) => item.keyword === 'COPY' && item.args === '. .')) {
      fail(instruction, `stage ${match[1]} must set a WORKDIR and \`COPY . .\` the whole context, for its files to be this repository's`);
    }
    from = { stage: match[1] as string };
    prefix = `${posix.normalize(stageWorkdir)}/`;
  }
  if (words.length < 2) fail(instruction, 'COPY needs a source and a destination');
  const dest = words.pop() as string;
  if (words.length > 1 && !dest.endsWith('/')) fail(instruction, 'several sources need a destination folder ending with /');
  const sources = words.map((source) => {
    if (/[*?[\]$]/.test(source)) fail(instruction, `wildcards and variables are not understood: ${source}`);
    if (from === 'context') {
      if (source.startsWith('/') || posix.normalize(source).startsWith('..'))
        fail(instruction, `a context source must be a relative path inside the context: ${source}`);
      return posix.normalize(source);
    }
    if (!source.startsWith(prefix)) fail(instruction, `a source from another stage must lie under its WORKDIR ${prefix}: ${source}`);
    const inside = posix.normalize(source.slice(prefix.length));
    if (inside.startsWith('..') || inside.split('/').includes('node_modules')) fail(instruction, `only the stage's own built files are understood: ${source}`);
    return inside;
  });
  const absolute = dest.startsWith('/') ? posix.normalize(dest) : posix.join(workdir, dest);
  if (absolute !== workdir && !absolute.startsWith(`${workdir}/`)) fail(instruction, `destination ${dest} is outside WORKDIR ${workdir}`);
  const relative = posix.relative(workdir, absolute);
  return {
    kind: 'copy',
    from,
    sources,
    dest: dest.endsWith('/') || relative === '' ? `${relative === '' ? '.' : relative}/` : relative,
    line: instruction.line,
  };
}

/**
 * A .dockerignore: `*`, `?` and `**` patterns and `!` exceptions, the last match deciding, a
 * pattern that matches a folder ignoring what is inside it. Character classes are refused.
 */
export function readDockerignore(text: string): (path: string) => boolean {
  const rules = text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const exception = line.startsWith('!');
      const pattern = posix
        .normalize((exception ? line.slice(1) : line).trim())
        .replace(/^\/+/, '')
        .replace(/\/+$/, '');
      if (/[[\]\\]/.test(pattern)) throw new DockerfileError(`.dockerignore: character classes and escapes are not understood: ${line}`);
      let source = '^';
      for (let i = 0; i < pattern.length; i += 1) {
        const char = pattern[i] as string;
        if (char === '*' && pattern[i + 1] === '*') {
          i += 1;
          if (pattern[i + 1] === '/') {
            i += 1;
            source += '(?:.*/)?';
          } else {
            source += '.*';
          }
        } else if (char === '*') {
          source += '[^/]*';
        } else if (char === '?') {
          source += '[^/]';
        } else {
          source += char.replace(/[.+^${}()|]/g, '\\$&');
        }
      }
      return { exception, regex: new RegExp(`${source}$`) };
    });
  return (path: string) => {
    const parts = posix.normalize(path).split('/');
    const prefixes = parts.map((_part, index) => parts.slice(0, index + 1).join('/'));
    let ignored = false;
    for (const rule of rules) if (prefixes.some((prefix) => rule.regex.test(prefix))) ignored = !rule.exception;
    return ignored;
  };
}
