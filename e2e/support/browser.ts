import { type Browser, chromium } from 'playwright-core';

/** Debian's chromium, as the architecture page says; a missing binary says how to install it. */
export async function launchChromium(): Promise<Browser> {
  try {
    return await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
    });
  } catch (error) {
    throw new Error(`could not start /usr/bin/chromium (install it with: bash scripts/install-test-deps.sh): ${(error as Error).message}`);
  }
}
