// What a load repeats, and what a run of it answers: shared by autocannon's load and the steady one.

/** One HTTP request, repeated. */
export interface LoadTarget {
  url: string;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
  /** Paths (with their query) taken in turn instead of the url's, so no two requests in a row ask the same. */
  paths?: readonly string[];
  /** Each request carries its own Idempotency-Key, so none is a replay. */
  uniqueIdempotencyKey?: boolean;
  /** A check of every response body (a 200 can still carry an error, as JSON-RPC does); failures count as mismatches. */
  expectBody?: { check(body: string): boolean; description: string };
}

/** What one run of either load answered. */
export interface Outcome {
  reqPerSec: number;
  /** Responses received. */
  requests: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  /** The non-2xx status codes and their counts, e.g. `429 ×3`. */
  codes: string;
  /** Connection errors, timeouts included. */
  errors: number;
  timeouts: number;
  mismatches: number;
}

/** Idempotency keys made so far by this process, so every run's are new. */
let keys = 0;

/** The path and headers of each next request: the target's, with the next path in turn and a fresh Idempotency-Key when asked. */
export function requestSequence(target: LoadTarget): () => { path?: string; headers: Record<string, string> } {
  let sent = 0;
  return () => {
    sent += 1;
    const headers = { ...target.headers, ...(target.uniqueIdempotencyKey ? { 'idempotency-key': `bench-${process.pid}-${(keys += 1)}` } : {}) };
    return target.paths ? { path: target.paths[sent % target.paths.length], headers } : { headers };
  };
}
