export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `check` holds, polling every 100 ms; answers how long it took, or throws after `timeoutMs`. */
export async function until(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<number> {
  const started = Date.now();
  for (;;) {
    try {
      if (await check()) return Date.now() - started;
    } catch {
      // not yet
    }
    if (Date.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs / 1000} s`);
    await sleep(100);
  }
}
