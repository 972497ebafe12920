// The reference row: how long the API reference takes to show its content in chromium, from the
// navigation to the first operation on screen (laid out, with a box), for the reference as HTML
// (/developers/reference) and the interactive one (/developers/reference/interactive, Scalar's
// bundle rendering /openapi.json), each in a fresh browser context (nothing cached), then once
// more in the same context (the bundle from the browser's cache). The median of a few loads each,
// against the embedded product (docs/decisions.md §25).
import { type Browser, chromium } from 'playwright-core';
import { progress } from './progress.js';
import { atMostCheck, figure, type Measurement } from './row.js';
import { type Servers } from './servers.js';

const LOADS = 5;
/** The content of the reference must show within this. */
const TARGET_MS = 1_000;

/** Where each reference's first operation is, once it is drawn. */
const FIRST_OPERATION = { '/developers/reference': 'section.operation h3', '/developers/reference/interactive': 'h3.section-header-label' } as const;
type ReferencePath = keyof typeof FIRST_OPERATION;

/**
 * Milliseconds from the navigation's start to the first frame in which the first operation has a
 * box, read in the page itself (requestAnimationFrame, before each paint); every request's outcome too.
 */
async function load(browser: Browser, url: string, selector: string, again: boolean): Promise<{ ms: number; failed: string[] }> {
  const context = await browser.newContext();
  try {
    if (again) {
      // A page of its own, closed before the measured one opens: nothing of it is cut mid-request.
      const first = await context.newPage();
      await first.goto(url, { waitUntil: 'networkidle' });
      await first.close();
    }
    const page = await context.newPage();
    // In the page, as a string: the bench's sources are compiled without the DOM's types.
    await page.addInitScript(`(() => {
      const check = () => {
        const element = document.querySelector(${JSON.stringify(selector)});
        if (element !== null && element.getBoundingClientRect().height > 0) globalThis.shownAt = performance.now();
        else requestAnimationFrame(check);
      };
      requestAnimationFrame(check);
    })();`);
    const failed: string[] = [];
    page.on('requestfailed', (request) => failed.push(`${request.url()}: ${request.failure()?.errorText ?? 'failed'}`));
    page.on('response', (response) => {
      if (response.status() >= 400) failed.push(`${response.url()}: ${response.status()}`);
    });
    await page.goto(url);
    // Functions, not strings: the pages' CSP forbids eval, which a string would need.
    const shownAt = (): number | undefined => (globalThis as { shownAt?: number }).shownAt;
    await page.waitForFunction(shownAt, undefined, { timeout: 60_000 });
    const ms = Number(await page.evaluate(shownAt));
    return { ms, failed };
  } finally {
    await context.close();
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

export async function referenceRow({ servers }: { servers: Servers }): Promise<Measurement> {
  const server = await servers.embedded();
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
  });
  try {
    const details: Record<string, unknown> = {};
    const problems: string[] = [];
    const shown: Record<string, number> = {};
    for (const path of Object.keys(FIRST_OPERATION) as ReferencePath[]) {
      for (const again of [false, true]) {
        const loads = [];
        for (let i = 0; i < LOADS; i += 1) {
          progress(`  ${path}${again ? ', cached' : ''}: load ${i + 1} of ${LOADS}`);
          loads.push(await load(browser, `${server.origin}${path}`, FIRST_OPERATION[path], again));
        }
        const key = `${path}${again ? ' (cached)' : ''}`;
        shown[key] = median(loads.map((one) => one.ms));
        details[key] = { ms: loads.map((one) => Math.round(one.ms)) };
        problems.push(...new Set(loads.flatMap((one) => one.failed).map((failure) => `${key}: ${failure}`)));
      }
    }
    const plain = shown['/developers/reference'] ?? Number.NaN;
    const interactive = shown['/developers/reference/interactive'] ?? Number.NaN;
    const cached = shown['/developers/reference/interactive (cached)'] ?? Number.NaN;
    return {
      p50Ms: plain,
      checks: [atMostCheck('reference shown', plain, TARGET_MS, 'ms', ` (interactive: ${figure(interactive)} ms, ${figure(cached)} ms cached)`)],
      problems,
      details,
    };
  } finally {
    await browser.close();
  }
}
