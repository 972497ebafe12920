import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { posix } from 'node:path';
import { describe, expect, it } from 'vitest';

// Prose that names code is checked, by the rules of docs/decisions.md §27: links, paths, scripts, names a file holds, settings.
const repo = fileURLToPath(new URL('../../', import.meta.url));
/** This file, whose made-up names in its own test case are no use of them. */
const self = fileURLToPath(import.meta.url).slice(repo.length);

/** The Markdown this check reads: every page a newcomer or a contributor is sent to. */
const DOCUMENTS = [
  'README.md',
  'CONTRIBUTING.md',
  ...readdirSync(`${repo}docs`)
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
  'load-tests/README.md',
  'charts/agent-room/README.md',
];

/** What the check knows of the repository: its files, scripts, headings and the words its code uses. */
export interface Repository {
  files: ReadonlySet<string>;
  folders: ReadonlySet<string>;
  /** Whether git ignores a path (build output, reports, local files). */
  ignored(path: string): boolean;
  read(path: string): string;
  /** The scripts of the root package.json (`undefined`) or of a workspace, by package name or folder. */
  scripts(workspace?: string): ReadonlySet<string> | undefined;
  /** Upper-case words the code uses outside comments. */
  codeWords: ReadonlySet<string>;
}

function git(args: string[], input?: string): string {
  return execFileSync('git', args, { cwd: repo, encoding: 'utf8', input, maxBuffer: 64 * 1024 * 1024 });
}

/** Comments left out, so that a name only a comment still mentions does not count as used. */
function withoutComments(path: string, text: string): string {
  if (/\.(ts|js|mjs|cjs)$/.test(path)) return text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`\\])\/\/.*$/gm, '$1');
  if (/\.(sh|ya?ml|toml|tpl|txt|py)$|(^|\/)(Dockerfile|run)$/.test(path)) return text.replace(/(^|\s)#.*$/gm, '$1');
  return text;
}

/** The repository as git sees the working tree: tracked files and new ones it does not ignore. */
export function loadRepository(): Repository {
  const files = new Set(
    git(['ls-files', '-z', '--cached', '--others', '--exclude-standard'])
      .split('\0')
      .filter((path) => path !== '' && existsSync(`${repo}${path}`)),
  );
  const folders = new Set<string>();
  for (const file of files) for (let i = file.indexOf('/'); i >= 0; i = file.indexOf('/', i + 1)) folders.add(file.slice(0, i));
  const read = (path: string): string => readFileSync(`${repo}${path}`, 'utf8');
  const ignoredCache = new Map<string, boolean>();
  const ignored = (path: string): boolean => {
    let answer = ignoredCache.get(path);
    if (answer === undefined) {
      answer = spawnSync('git', ['check-ignore', '-q', '--no-index', path], { cwd: repo }).status === 0;
      ignoredCache.set(path, answer);
    }
    return answer;
  };
  const manifest = (folder: string): { name?: string; scripts?: Record<string, string>; workspaces?: string[] } =>
    JSON.parse(read(`${folder}package.json`)) as { name?: string; scripts?: Record<string, string>; workspaces?: string[] };
  const root = manifest('');
  const workspaces = new Map<string, ReadonlySet<string>>();
  for (const folder of root.workspaces ?? []) {
    const { name, scripts = {} } = manifest(`${folder}/`);
    workspaces.set(folder, new Set(Object.keys(scripts)));
    if (name !== undefined) workspaces.set(name, new Set(Object.keys(scripts)));
  }
  const codeWords = new Set<string>();
  for (const file of files) {
    if (
      file.endsWith('.md') ||
      file === 'package-lock.json' ||
      file === self ||
      !/\.(ts|js|mjs|cjs|sh|json|ya?ml|toml|tpl|txt|py|proto|lua)$|(^|\/)(Dockerfile|run)$/.test(file)
    )
      continue;
    for (const [word] of withoutComments(file, read(file)).matchAll(/\b[A-Z][A-Z0-9_]*\b/g)) codeWords.add(word);
  }
  return {
    files,
    folders,
    ignored,
    read,
    scripts: (workspace) => (workspace === undefined ? new Set(Object.keys(root.scripts ?? {})) : workspaces.get(workspace)),
    codeWords,
  };
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, each space a hyphen. */
function anchorOf(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M} _-]/gu, '')
    .replace(/ /g, '-');
}

interface Parsed {
  /** The page with its fenced blocks blanked out (their lines kept, so line numbers hold). */
  prose: string;
  /** Fenced blocks, each with its language and its first line's number. */
  blocks: { language: string; text: string; line: number }[];
  anchors: Set<string>;
}

function parse(text: string): Parsed {
  const lines = text.split('\n');
  const prose: string[] = [];
  const blocks: Parsed['blocks'] = [];
  const anchors = new Set<string>();
  let block: Parsed['blocks'][number] | undefined;
  lines.forEach((line, index) => {
    const fence = /^\s*```(\S*)/.exec(line);
    if (fence !== null) {
      if (block === undefined) block = { language: fence[1] ?? '', text: '', line: index + 2 };
      else {
        blocks.push(block);
        block = undefined;
      }
      prose.push('');
      return;
    }
    if (block !== undefined) {
      block.text += `${line}\n`;
      prose.push('');
      return;
    }
    prose.push(line);
    const heading = /^#{1,6} (.*)$/.exec(line)?.[1];
    if (heading !== undefined) {
      const anchor = anchorOf(heading);
      let unique = anchor;
      for (let n = 1; anchors.has(unique); n += 1) unique = `${anchor}-${n}`;
      anchors.add(unique);
    }
  });
  return { prose: prose.join('\n'), blocks, anchors };
}

const lineOf = (text: string, index: number): number => text.slice(0, index).split('\n').length;

/** One path segment: names, `*`, `<placeholder>`, `{a,b}`. */
const SEGMENT = String.raw`(?:[\w.@-]|\*|<[\w-]+>|\{[\w.,-]+\})+`;
const PATH = new RegExp(String.raw`(?<![\w./:{}<>*@$~-])(${SEGMENT}(?:/${SEGMENT})*/?)`, 'g');

function pathPattern(path: string): RegExp {
  const source = path
    .replace(/\/$/, '')
    .split(/(\*|<[\w-]+>|\{[\w.,-]+\})/)
    .map((part) => {
      if (part === '*' || part.startsWith('<')) return '[^/]+';
      if (part.startsWith('{'))
        return `(?:${part
          .slice(1, -1)
          .split(',')
          .map((name) => name.replace(/[.+?^$()|[\]\\]/g, '\\$&'))
          .join('|')})`;
      return part.replace(/[.+?^$()|[\]\\{}*]/g, '\\$&');
    })
    .join('');
  return new RegExp(`^${source}$`);
}

/** `{a,b}` written out: `services/{room,auth}/` is two paths, each checked. */
function expandBraces(path: string): string[] {
  const brace = /\{([\w.,-]+)\}/.exec(path);
  if (brace === null) return [path];
  return (brace[1] ?? '').split(',').flatMap((name) => expandBraces(`${path.slice(0, brace.index)}${name}${path.slice(brace.index + brace[0].length)}`));
}

/** Whether a path (braces written out) names something in the repository, by the rules above; the reason when it does not. */
function pathProblem(path: string, repository: Repository): string | undefined {
  const folder = path.endsWith('/');
  const bare = path.replace(/\/$/, '');
  const placeholders = /[*<]/.test(bare);
  const pattern = pathPattern(bare);
  if (placeholders) {
    if ([...(folder ? [] : repository.files), ...repository.folders].some((candidate) => pattern.test(candidate))) return undefined;
  } else if (repository.folders.has(bare) || (!folder && repository.files.has(bare))) return undefined;
  const example = bare.replace(/\*|<[\w-]+>/g, 'x');
  if (!repository.ignored(folder ? `${example}/` : example)) return 'no such file or folder';
  const dist = /^(.+?)\/dist\/(.+)$/.exec(bare);
  if (dist !== null) {
    const [, workspace = '', output = ''] = dist;
    const source = output.replace(/\.(d\.ts|js|js\.map)$/, '.ts');
    const sources = [pathPattern(`${workspace}/src/${source}`), pathPattern(`${workspace}/${source}`)];
    if ([...repository.files].some((file) => sources.some((sourcePattern) => sourcePattern.test(file)))) return undefined;
    const named = `dist/${output}`;
    if (
      !placeholders &&
      [...repository.files].some((file) => file.startsWith(`${workspace}/`) && !file.endsWith('.md') && repository.read(file).includes(named))
    )
      return undefined;
    return `a build output with no source (${workspace}/src/${source}) and named by no file of ${workspace}/`;
  }
  // What a run writes: git keeps the folder above the first ignored one (or above the ignored file).
  const segments = example.split('/');
  let kept = segments.slice(0, -1).join('/');
  for (let i = 1; i < segments.length; i += 1) {
    if (repository.ignored(`${segments.slice(0, i).join('/')}/`)) {
      kept = segments.slice(0, i - 1).join('/');
      break;
    }
  }
  return kept === '' || repository.folders.has(kept) ? undefined : `no folder ${kept}/`;
}

/** Every reference of one page that names nothing, as `file:line: what: why`. */
export function staleReferences(file: string, text: string, repository: Repository): string[] {
  const parsed = parse(text);
  const problems: string[] = [];
  const report = (index: number, where: 'prose' | 'text', what: string, why: string): void => {
    problems.push(`${file}:${lineOf(where === 'prose' ? parsed.prose : text, index)}: ${what}: ${why}`);
  };
  const directory = posix.dirname(file);
  const topFolders = new Set([...repository.folders].filter((folder) => !folder.includes('/')));

  // Links.
  const externalLinkTexts: string[] = [];
  for (const match of parsed.prose.matchAll(/\[((?:[^\][]|\[[^\]]*\])*)\]\(([^)\s]+)\)/g)) {
    const [, label = '', target = ''] = match;
    if (/^[a-z][a-z\d+.-]*:/i.test(target)) {
      externalLinkTexts.push(label);
      continue;
    }
    const [path = '', anchor] = target.split('#');
    const resolved = path === '' ? file : posix.normalize(path.startsWith('/') ? path.slice(1) : posix.join(directory, path)).replace(/\/$/, '');
    if (path !== '' && (resolved.startsWith('..') || !(repository.files.has(resolved) || repository.folders.has(resolved)))) {
      report(match.index, 'prose', `link ${target}`, 'no such file or folder');
      continue;
    }
    if (anchor !== undefined && resolved.endsWith('.md')) {
      const anchors = resolved === file ? parsed.anchors : parse(repository.read(resolved)).anchors;
      if (!anchors.has(anchor)) report(match.index, 'prose', `link ${target}`, `${resolved} has no heading with the anchor #${anchor}`);
    }
  }

  // Code: inline code spans (which may run over a line break) and fenced blocks, with where each starts.
  const code: { text: string; index: number; where: 'prose' | 'text'; shell: boolean }[] = [];
  for (const match of parsed.prose.matchAll(/`([^`]+)`/g)) code.push({ text: match[1] ?? '', index: match.index + 1, where: 'prose', shell: false });
  const lineStarts = text.split('\n').reduce<number[]>((starts, line) => [...starts, (starts.at(-1) ?? 0) + line.length + 1], [0]);
  for (const block of parsed.blocks) code.push({ text: block.text, index: lineStarts[block.line - 1] ?? 0, where: 'text', shell: block.language === 'sh' });

  // Paths, in prose and in code.
  const seen = new Set<string>();
  const checkPaths = (body: string, index: number, where: 'prose' | 'text'): void => {
    for (const match of body.matchAll(PATH)) {
      const path = (match[1] ?? '').replace(/[.,:;-]+$/, '');
      if (!path.includes('/') || !topFolders.has(path.split('/')[0] ?? '') || seen.has(`${path}@${index + match.index}`)) continue;
      seen.add(`${path}@${index + match.index}`);
      for (const each of expandBraces(path)) {
        const why = pathProblem(each, repository);
        if (why !== undefined) report(index + match.index, where, `path ${each}`, why);
      }
    }
  };
  checkPaths(
    parsed.prose.replace(/`[^`]+`/g, (span) => ' '.repeat(span.length)),
    0,
    'prose',
  );
  for (const piece of code) checkPaths(piece.text, piece.index, piece.where);

  // npm scripts, wherever a command is written.
  for (const match of text.matchAll(/\bnpm (run(?:-script)?\s+([\w:.-]+)|start\b|test\b)([^\n`|]*)/g)) {
    const script = match[2] ?? (match[1] ?? '').trim();
    const options = (match[3] ?? '').split(' -- ')[0] ?? '';
    const workspace = /(?:^|\s)(?:-w|--workspace)(?:=|\s+)(\S+)/.exec(options)?.[1];
    const scripts = repository.scripts(workspace);
    if (scripts === undefined) report(match.index, 'text', `npm ${match[1] ?? ''} -w ${workspace ?? ''}`, `no workspace ${workspace ?? ''}`);
    else if (!scripts.has(script))
      report(
        match.index,
        'text',
        `npm run ${script}`,
        `no script ${script} in ${workspace === undefined ? 'package.json' : `the package.json of ${workspace}`}`,
      );
  }

  // What a file holds: `path` (`NAME`, `call(…)`…): the code spans that open the parenthesis, up to
  // the first words that are not code, name what that file defines.
  for (const match of parsed.prose.matchAll(/`([\w.@/-]+\.[a-z]+)`\s*\(((?:`[^`]*`)(?:`[^`]*`|[^)`])*)\)/g)) {
    const [, path = '', group = ''] = match;
    if (!repository.files.has(path)) continue;
    const holds = repository.read(path);
    const opening = /^(?:`[^`]+`\s*(?:[,;]\s*|and\s+|or\s+)?)+/.exec(group)?.[0] ?? '';
    for (const [, span = ''] of opening.matchAll(/`([^`]+)`/g)) {
      const name = /^([A-Za-z_$][\w$]*)(?:[.(].*)?$/.exec(span)?.[1];
      if (name !== undefined && !new RegExp(String.raw`(?<![\w$])${name.replace(/\$/g, '\\$')}(?![\w$])`).test(holds))
        report(match.index, 'prose', `${name} in ${path}`, `${path} does not hold ${name}`);
    }
  }

  // Settings and constants.
  const shellVariables = new Set<string>();
  const shell = parsed.blocks
    .filter((block) => block.language === 'sh')
    .map((block) => block.text)
    .join('\n');
  for (const [, name = ''] of shell.matchAll(/^([A-Z][A-Z0-9_]*)=/gm)) if (new RegExp(String.raw`\$\{?${name}\b`).test(shell)) shellVariables.add(name);
  const notOurs = (name: string): boolean => shellVariables.has(name) || externalLinkTexts.some((label) => new RegExp(String.raw`\b${name}\b`).test(label));
  const checkName = (name: string, index: number, where: 'prose' | 'text'): void => {
    if (!notOurs(name) && !repository.codeWords.has(name)) report(index, where, `setting or constant ${name}`, 'used by no code');
  };
  for (const piece of code) {
    for (const match of piece.text.matchAll(/\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b/g)) checkName(match[0], piece.index + match.index, piece.where);
    for (const match of piece.text.matchAll(/(?<![\w$.-])([A-Z][A-Z0-9_]*)=/g)) checkName(match[1] ?? '', piece.index + match.index, piece.where);
  }
  let variableTable = false;
  parsed.prose.split('\n').forEach((line, index) => {
    if (!line.startsWith('|')) variableTable = false;
    else if (/^\|\s*variable\s*\|/.test(line)) variableTable = true;
    else if (variableTable) {
      const first = line.split('|')[1] ?? '';
      for (const [, name = ''] of first.matchAll(/`([A-Z][A-Z0-9_]*)`/g)) checkName(name, lineStarts[index] ?? 0, 'text');
    }
  });
  return [...new Set(problems)];
}

describe('prose that names code', () => {
  const repository = loadRepository();

  it.each(DOCUMENTS)('%s names only files, scripts and settings that exist', (file) => {
    expect(staleReferences(file, repository.read(file), repository)).toEqual([]);
  });

  it('reads every page of docs/ and the pages the README sends a reader to', () => {
    expect(DOCUMENTS).toContain('docs/http-contract.md');
    const readme = repository.read('README.md');
    for (const page of DOCUMENTS.filter((path) => path.startsWith('docs/'))) expect(readme, `the README links ${page}`).toContain(`](${page})`);
  });

  it('fails on a made-up path, script, setting, link, anchor or name a file holds, and on nothing real', () => {
    const page = [
      '# A page',
      '',
      'Real: `services/edge/src/operations/table.ts`, `scripts/install-tools.sh`, `charts/agent-room/values.yaml`,',
      '`launcher/dist/start.js`, `services/{room,auth}/src/`, `e2e/<feature>/`, `load-tests/reports/<scenario>.json`,',
      '`npm run bench`, `npm test -w @agentroom/room`, `QUOTA_PER_ADDRESS`, [the contract](http-contract.md#the-http-contract),',
      "[the README](../README.md#first-five-minutes), [a page](#a-page), [glibc's `MALLOC_ARENA_MAX`](https://man7.org/linux/man-pages/man3/mallopt.3.html).",
      '',
      'Made up: `services/edge/src/operations/tables.ts`, `scripts/{install-tools,install-toys}.sh`.',
      "Held: `api/src/rest.ts` (`REST_BINDINGS`, `restUrl`; not `checked` here); not held: `services/edge/src/mcp/tools.ts` (`bind('room_post', {...})`).",
      '```sh',
      'ROOM=http://localhost:8080',
      'curl $ROOM/api/v1/posts',
      'QUOTA_PER_ADRESS=10 npm run benchmark',
      'node launcher/dist/begin.js',
      '```',
      '',
      'And [a page](no-such-page.md), [an anchor](http-contract.md#no-such-heading), [here](#nowhere), `npm test -w @agentroom/nothing`.',
    ].join('\n');
    expect(staleReferences('docs/example.md', page, repository)).toEqual([
      'docs/example.md:17: link no-such-page.md: no such file or folder',
      'docs/example.md:17: link http-contract.md#no-such-heading: docs/http-contract.md has no heading with the anchor #no-such-heading',
      'docs/example.md:17: link #nowhere: docs/example.md has no heading with the anchor #nowhere',
      'docs/example.md:8: path services/edge/src/operations/tables.ts: no such file or folder',
      'docs/example.md:8: path scripts/install-toys.sh: no such file or folder',
      'docs/example.md:14: path launcher/dist/begin.js: a build output with no source (launcher/src/begin.ts) and named by no file of launcher/',
      'docs/example.md:13: npm run benchmark: no script benchmark in package.json',
      'docs/example.md:17: npm test -w @agentroom/nothing: no workspace @agentroom/nothing',
      'docs/example.md:9: bind in services/edge/src/mcp/tools.ts: services/edge/src/mcp/tools.ts does not hold bind',
      'docs/example.md:13: setting or constant QUOTA_PER_ADRESS: used by no code',
    ]);
  });
});
