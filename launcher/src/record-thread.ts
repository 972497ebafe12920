// The embedded record, started in a worker thread of npm start's process (docs/decisions.md §39):
// PGlite's WASM and the follower's archiving run on their own thread, off the event loop that serves
// every request. It still meets the room and edge over loopback gRPC, as in the cluster.
import { Worker } from 'node:worker_threads';
import { type DestinationStream, type Logger, type LogFormat, logDestination } from '@agentroom/kit/log';
import { addThreadMetrics, type MetricsJson } from '@agentroom/kit/metrics';
import { StartupError } from '@agentroom/kit/process';
import type { RecordConfig } from '@agentroom/record';

/** What the launcher hands the worker. */
export interface RecordWorkerData {
  config: RecordConfig;
  level: string;
}

/** What the launcher asks the worker. */
export type ToRecord = { kind: 'metrics'; id: number } | { kind: 'stop' };

/** What the worker tells the launcher. */
export type FromRecord =
  | { kind: 'log'; line: string }
  | { kind: 'ready'; port: number; storage: 'pglite' | 'postgres' }
  | { kind: 'failed'; problem?: string; message: string; stack?: string }
  | { kind: 'metrics'; id: number; metrics: MetricsJson }
  | { kind: 'stopped'; error?: string };

export interface RecordThread {
  /** The record's gRPC port on loopback. */
  port: number;
  storage: 'pglite' | 'postgres';
  /** The record stopped as its own process stops (position stored, database closed), then its thread ended. */
  stop(): Promise<void>;
}

/** How long a metrics scrape waits for the worker's figures before it answers without them. */
const METRICS_TIMEOUT_MS = 1_000;
/** Beyond the record's own shutdown grace: how long stop waits for the worker before ending its thread. */
const STOP_MARGIN_MS = 5_000;

/**
 * The built worker beside this file; from the TypeScript sources (tests run them), the build's,
 * since a worker thread loads what Node runs, not what vitest transforms.
 */
function workerUrl(): URL {
  return new URL(import.meta.url.endsWith('.ts') ? '../dist/record-worker.js' : './record-worker.js', import.meta.url);
}

/**
 * This process's flags less the export conditions that send workspace packages to their TypeScript
 * sources (vitest's), when it has any; else none given, so the worker inherits them (a worker
 * refuses V8's flags, npm start's among them, when they are given, and takes them from the process).
 */
function workerExecArgv(): { execArgv?: string[] } {
  const isCondition = (flag: string): boolean => flag === '--conditions' || flag === '-C' || flag.startsWith('--conditions=');
  if (!process.execArgv.some(isCondition)) return {};
  const flags: string[] = [];
  for (let i = 0; i < process.execArgv.length; i += 1) {
    const flag = process.execArgv[i] ?? '';
    if (flag === '--conditions' || flag === '-C') i += 1;
    else if (!isCondition(flag)) flags.push(flag);
  }
  return { execArgv: flags };
}

/**
 * Starts the record (`start` of @agentroom/record, with `config`) in a worker thread; resolves once
 * it serves, with its port. Its log lines go to `output` as the launcher's own; a start-up failure
 * rejects with the same one-line StartupError (or the bug's stack) that it would throw in-process.
 * Should the thread die later, `log` says so and the room goes on without it, as when the record is down.
 */
export function startRecordThread(config: RecordConfig, output: LogFormat | DestinationStream, log: Logger): Promise<RecordThread> {
  const destination = logDestination(output);
  const worker = new Worker(workerUrl(), {
    name: 'record',
    workerData: { config, level: config.LOG_LEVEL } satisfies RecordWorkerData,
    ...workerExecArgv(),
  });
  const ask = (message: ToRecord): void => worker.postMessage(message);
  let nextId = 0;
  const pending = new Map<number, (metrics: MetricsJson) => void>();
  let stopped: ((error?: string) => void) | undefined;
  let exited = false;

  return new Promise<RecordThread>((resolve, reject) => {
    let ready = false;
    const removeMetrics = addThreadMetrics(
      () =>
        new Promise<MetricsJson>((answer) => {
          if (exited) return answer([]);
          const id = (nextId += 1);
          const timer = setTimeout(() => (pending.delete(id), answer([])), METRICS_TIMEOUT_MS);
          pending.set(id, (metrics) => (clearTimeout(timer), answer(metrics)));
          ask({ kind: 'metrics', id });
        }),
    );
    worker.on('message', (message: FromRecord) => {
      switch (message.kind) {
        case 'log':
          destination.write(message.line);
          return;
        case 'metrics':
          pending.get(message.id)?.(message.metrics);
          pending.delete(message.id);
          return;
        case 'stopped':
          stopped?.(message.error);
          return;
        case 'failed': {
          const error = message.problem === undefined ? new Error(message.message) : new StartupError(message.problem);
          if (message.problem === undefined && message.stack !== undefined) error.stack = message.stack;
          removeMetrics();
          void worker.terminate();
          reject(error);
          return;
        }
        case 'ready':
          ready = true;
          resolve({
            port: message.port,
            storage: message.storage,
            async stop() {
              if (!exited) {
                const done = new Promise<string | undefined>((settle) => {
                  stopped = settle;
                  worker.once('exit', () => settle(undefined));
                });
                ask({ kind: 'stop' });
                const timer = setTimeout(() => stopped?.('it did not stop in time'), config.SHUTDOWN_GRACE_MS + STOP_MARGIN_MS);
                const problem = await done;
                clearTimeout(timer);
                if (problem !== undefined) log.warn({ problem }, 'the record did not stop cleanly');
              }
              removeMetrics();
              await worker.terminate();
            },
          });
          return;
      }
    });
    worker.on('error', (error) => {
      if (!ready) reject(error);
      else log.error({ err: error }, 'the record stopped: search and the posts past the room window are unavailable until a restart');
    });
    worker.on('exit', (code) => {
      exited = true;
      for (const answer of pending.values()) answer([]);
      pending.clear();
      if (!ready) {
        removeMetrics();
        reject(new Error(`the record's thread exited (code ${code}) before it started`));
      }
    });
  });
}
