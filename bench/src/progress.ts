// What the bench is doing, on stderr, with the time since it started: stdout keeps the table.
const began = Date.now();

export function progress(line: string): void {
  process.stderr.write(`[bench ${String(Math.round((Date.now() - began) / 1_000)).padStart(4)} s] ${line}\n`);
}

/** Seconds since the bench started. */
export function elapsedSeconds(): number {
  return (Date.now() - began) / 1_000;
}
