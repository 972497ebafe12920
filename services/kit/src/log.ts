import { pino, type DestinationStream, type Logger } from 'pino';
import { prettyFactory } from 'pino-pretty';
import { currentContext } from './context.js';
import { activeTraceIds } from './trace.js';

export type { DestinationStream, Logger } from 'pino';

/** `json`: one JSON object per line, for machines. `pretty`: one readable line, for people. */
export const LOG_FORMATS = ['json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** Pretty when a person watches stdout (a terminal), JSON when a program reads it (a pipe, a file). */
export function defaultLogFormat(): LogFormat {
  return process.stdout.isTTY === true ? 'pretty' : 'json';
}

let prettyStdout: DestinationStream | undefined;

/**
 * pino-pretty rendering in this thread and writing at once (stdout is synchronous on Linux for
 * terminals and pipes), so a line logged just before `process.exit` is never lost and every
 * logger of the process shares one destination. Each line reads
 * `[time] LEVEL: service: message (request <id>) {other fields}`; a request line's message already
 * says method, path, status and time, so its `http` fields are not repeated.
 */
function prettyDestination(): DestinationStream {
  if (prettyStdout) return prettyStdout;
  const render = prettyFactory({
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,service,requestId,http,trace_id,span_id',
    singleLine: true,
    messageFormat: (log, messageKey) => {
      const service = typeof log.service === 'string' ? `${log.service}: ` : '';
      const message = log[messageKey];
      const requestId = typeof log.requestId === 'string' ? ` (request ${log.requestId})` : '';
      // 8 hex digits tell traces apart by eye and find the JSON lines, which carry it whole.
      const traceId = typeof log.trace_id === 'string' ? ` (trace ${log.trace_id.slice(0, 8)})` : '';
      return `${service}${typeof message === 'string' ? message : ''}${requestId}${traceId}`;
    },
  });
  prettyStdout = {
    write(line: string) {
      process.stdout.write(render(line));
    },
  };
  return prettyStdout;
}

/** pino's number for `warn`: lines at or above it pass a quiet start-up. */
const WARN = 40;

/**
 * Readable lines, held to warnings and errors until `open()`: `npm start` in a terminal shows its
 * block of addresses first and the log below it, without every service's start-up lines.
 */
export function quietStartup(): { output: DestinationStream; open(): void } {
  let opened = false;
  const pretty = prettyDestination();
  return {
    output: {
      write(line: string) {
        if (opened || Number(/^\{"level":(\d+)/.exec(line)?.[1] ?? WARN) >= WARN) pretty.write(line);
      },
    },
    open() {
      opened = true;
    },
  };
}

let jsonStdoutStream: DestinationStream | undefined;

/** One synchronous destination on stdout for every JSON logger of the process; a broken pipe only silences it. */
function jsonStdout(): DestinationStream {
  jsonStdoutStream ??= pino.destination({ dest: 1, sync: true });
  return jsonStdoutStream;
}

/**
 * Logs to stdout with `service` on every line, the current `requestId` when there is one and the
 * current span's `trace_id` and `span_id` when tracing is on: JSON
 * (`format` `json`, the default) or readable lines (`pretty`, see LOG_FORMAT). A destination
 * stream instead of a format receives the JSON lines (tests).
 * Secrets never reach a log line: the paths below are redacted wherever they appear.
 */
export function createLogger(service: string, level = 'info', output: LogFormat | DestinationStream = 'json'): Logger {
  const options = {
    level,
    base: { service },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: ['authorization', '*.authorization', 'headers.authorization', 'password', '*.password', 'token', '*.token'],
      censor: '[redacted]',
    },
    // The trace of the current span, when tracing is on and a span is current: a line leads to its trace.
    mixin() {
      const context = currentContext();
      return { ...(context ? { requestId: context.requestId } : {}), ...activeTraceIds() };
    },
  };
  return pino(options, logDestination(output));
}

/**
 * Where lines of `output` go: stdout as JSON or pretty lines, or the stream given. A thread whose
 * loggers write elsewhere (a worker's, which posts its JSON lines) hands them to this one.
 */
export function logDestination(output: LogFormat | DestinationStream): DestinationStream {
  // Written at once, as pretty lines are: pino's default writes stdout asynchronously and, at
  // exit, flushes what is pending in a loop that never ends once stdout is a pipe nobody reads
  // (the parent that read it was killed), so the process could never exit, even on SIGTERM.
  if (output === 'json') return jsonStdout();
  return output === 'pretty' ? prettyDestination() : output;
}
