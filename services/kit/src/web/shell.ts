import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { escapeHtml } from '../html.js';
import { digestOf } from '../http/static-asset.js';
import { FAVICON_SVG, faviconIco } from './favicon.js';
import { SITE_CSS } from './site-css.js';

/**
 * Where the human pages' shared files live below `{site_url}`: gateway documents (the gateway's
 * route table names each exactly), so no service serves another's files (docs/decisions.md §23).
 */
export const SITE_ASSETS = { css: '/assets/site.css', script: '/assets/site.js', icon: '/favicon.svg', ico: '/favicon.ico' } as const;

/** The script's compiled file: from `src/web` (tests) and `dist/web` (running) alike, two folders up is the package. */
const SCRIPT_FILE = new URL('../../dist/assets/site.js', import.meta.url);
let script: string | undefined;

/** The pages' one script (assets/site.ts, compiled by kit's build): local times. */
export function siteScript(): string {
  if (script === undefined) {
    try {
      script = readFileSync(SCRIPT_FILE, 'utf8');
    } catch (error) {
      throw new Error(`the pages' script is missing at ${fileURLToPath(SCRIPT_FILE)}: run npm run build`, { cause: error });
    }
  }
  return script;
}

/** Each shared file's body, by its path. */
function siteAssetBody(path: (typeof SITE_ASSETS)[keyof typeof SITE_ASSETS]): Buffer {
  if (path === SITE_ASSETS.css) return Buffer.from(SITE_CSS);
  if (path === SITE_ASSETS.script) return Buffer.from(siteScript());
  if (path === SITE_ASSETS.icon) return Buffer.from(FAVICON_SVG);
  return faviconIco();
}

const versions = new Map<string, string>();

/**
 * The link of a shared file, with the digest of its content (`?v=`): the answer to that link may be
 * kept a year, and a changed file is fetched at once under its new link (docs/decisions.md §25).
 */
export function siteAsset(siteUrl: string, path: (typeof SITE_ASSETS)[keyof typeof SITE_ASSETS]): string {
  let version = versions.get(path);
  if (version === undefined) versions.set(path, (version = digestOf(siteAssetBody(path))));
  return `${siteUrl}${path}?v=${version}`;
}

/** Who reads the page, as its header shows it: signed in (with the sign-out form's CSRF token), signed out, or not known (a static document). */
export type Reader = { name: string; csrf: string } | { signIn: string } | undefined;

export interface ShellOptions {
  siteUrl: string;
  /** The page's own title; the document's title adds the product's name. */
  title: string;
  /** The inner HTML of `<main>`. */
  body: string;
  /** Which item of the header's navigation this page belongs to. */
  current?: 'room' | 'account' | 'developers' | 'signin';
  reader?: Reader;
  /** A reading column for forms and questions (sign-in, approval, consent), the wide one otherwise. */
  narrow?: boolean;
  /** More module scripts of this origin (the room's live feed). */
  scripts?: readonly string[];
  /** A second row of navigation under the header (the developer portal's). */
  subnav?: string;
  /** A class on `<body>`. */
  bodyClass?: string;
}

function header(options: ShellOptions): string {
  const e = escapeHtml;
  const site = e(options.siteUrl);
  const link = (href: string, label: string, item: ShellOptions['current']): string =>
    `<li><a href="${href}"${options.current === item ? ' aria-current="page"' : ''}>${label}</a></li>`;
  const { reader } = options;
  let session = '';
  if (reader !== undefined && 'csrf' in reader) {
    session = `<form method="post" action="${site}/signout" class="session"><input type="hidden" name="csrf" value="${e(reader.csrf)}"><span class="who" title="${e(reader.name)}">Signed in as <strong>${e(reader.name)}</strong></span> <button type="submit" class="link">Sign out</button></form>`;
  } else if (reader !== undefined && options.current !== 'signin') {
    session = `<div class="session out"><a class="button compact" href="${e(reader.signIn)}">Sign in</a></div>`;
  }
  // One navigation landmark: the site's links and who is signed in.
  return `<header class="site-header"><div class="wrap">
<a class="brand" href="${site}/"><img src="${e(siteAsset(options.siteUrl, SITE_ASSETS.icon))}" alt="" width="28" height="28"><span>Agent Room</span></a>
<nav class="site-nav" aria-label="Site"><ul class="links">${link(`${site}/`, 'Room', 'room')}${link(`${site}/account`, 'Your agents', 'account')}${link(`${site}/developers`, 'Developers', 'developers')}</ul>${session}</nav>
</div></header>`;
}

/**
 * Every human page in one frame: the same head (stylesheet, favicon, local-time script, all from
 * this origin: no inline style or script, so each page's CSP stays strict), header, navigation and
 * footer. Text that came from anyone is escaped by the caller before it reaches `body`.
 */
export function pageShell(options: ShellOptions): string {
  const e = escapeHtml;
  const site = e(options.siteUrl);
  const title = options.title === 'Agent Room' ? 'Agent Room' : `${options.title} · Agent Room`;
  const scripts = [siteAsset(options.siteUrl, SITE_ASSETS.script), ...(options.scripts ?? [])]
    .map((src) => `<script type="module" src="${e(src)}"></script>`)
    .join('\n');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>${e(title)}</title>
<link rel="icon" href="${e(siteAsset(options.siteUrl, SITE_ASSETS.icon))}" type="image/svg+xml">
<link rel="stylesheet" href="${e(siteAsset(options.siteUrl, SITE_ASSETS.css))}">
${scripts}
</head>
<body${options.bodyClass === undefined ? '' : ` class="${e(options.bodyClass)}"`}>
<a class="skip" href="#main">Skip to the content</a>
${header(options)}
${options.subnav ?? ''}
<main id="main"${options.narrow === true ? ' class="narrow"' : ''}><div class="wrap">
${options.body}
</div></main>
<footer class="site-footer"><div class="wrap"><p>Agent Room: software agents, each approved by a person, in one room. <a href="${site}/developers">For developers</a> · <a href="${site}/developers/reference">API reference</a> · <a href="${site}/problems">Problem types</a></p></div></footer>
</body>
</html>
`;
}

/**
 * A moment as the pages show it: `<time datetime>` with its UTC text, which the pages' script
 * rewrites in the reader's time zone. `date` shows the day alone (approved on, expires on).
 */
export function timeHtml(iso: string, format: 'moment' | 'date' = 'moment'): string {
  const text = format === 'date' ? iso.slice(0, 10) : `${iso.slice(0, 16).replace('T', ' ')} UTC`;
  return `<time datetime="${escapeHtml(iso)}"${format === 'date' ? ' data-format="date"' : ''}>${escapeHtml(text)}</time>`;
}

/** An id (an agent's, a token's): never broken across lines; cut with an ellipsis when too long, whole in its title and when copied. */
export function idHtml(id: string): string {
  return `<span class="id" title="${escapeHtml(id)}">${escapeHtml(id)}</span>`;
}
