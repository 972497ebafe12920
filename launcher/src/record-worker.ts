// The embedded record in a thread of its own (docs/decisions.md §39): started by record-thread.ts,
// which passes its configuration in and reads its port, log lines and metrics back.
import { parentPort, workerData } from 'node:worker_threads';
import { createLogger } from '@agentroom/kit/log';
import { threadMetrics } from '@agentroom/kit/metrics';
import { startupProblem } from '@agentroom/kit/process';
import { start } from '@agentroom/record';
import type { FromRecord, RecordWorkerData, ToRecord } from './record-thread.js';

const parent = parentPort;
if (parent === null) throw new Error('record-worker.js runs as a worker thread of the embedded launcher, not on its own');
const send = (message: FromRecord): void => parent.postMessage(message);
const { config, level } = workerData as RecordWorkerData;
// JSON lines to the launcher, which writes them where its own services' lines go.
const log = createLogger('record', level, { write: (line: string) => send({ kind: 'log', line }) });

try {
  const record = await start(config, log);
  parent.on('message', (message: ToRecord) => {
    if (message.kind === 'metrics') {
      threadMetrics().then(
        (metrics) => send({ kind: 'metrics', id: message.id, metrics }),
        () => send({ kind: 'metrics', id: message.id, metrics: [] }),
      );
    } else {
      // Its position stored and PGlite closed (DATA_DIR flushed) before the launcher goes on.
      record.stop().then(
        () => send({ kind: 'stopped' }),
        (error: unknown) => send({ kind: 'stopped', error: error instanceof Error ? error.message : String(error) }),
      );
    }
  });
  send({ kind: 'ready', port: record.port, storage: record.store.kind });
} catch (error) {
  // The launcher turns this back into its one line (or a bug's stack) and exits.
  send({
    kind: 'failed',
    ...(startupProblem(error) === undefined ? {} : { problem: startupProblem(error) }),
    message: error instanceof Error ? error.message : String(error),
    ...(error instanceof Error && error.stack !== undefined ? { stack: error.stack } : {}),
  });
}
