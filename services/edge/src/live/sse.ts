import type { Logger } from '@agentroom/kit/log';
import { liveStreamsEnded, liveSubscribers } from '@agentroom/kit/metrics';
import { DomainError, unavailable } from '@agentroom/kit/problems';
import { STREAM_ID } from '@agentroom/kit/store';
import type { Socket } from 'node:net';
import type { Request, Response } from 'express';
import type { LiveFeedName } from '@agentroom/api';

/** A live feed, by its row's name (LIVE_FEEDS in api/). */
export type Feed = LiveFeedName;
export type EndReason = 'slow_client' | 'token_revoked' | 'upstream' | 'shutdown';

export interface LiveOptions {
  /** How often every open stream gets a comment line, so proxies keep idle streams open. */
  heartbeatMs: number;
  /** Bytes a stream may have waiting for a client that does not read, before it is cut off. */
  maxBufferedBytes: number;
}

const CRLF = Buffer.from('\r\n', 'latin1');

/** How soon a client reconnects when its stream ends because this process shuts down. */
const SHUTDOWN_RETRY_MS = 250;

/**
 * One SSE frame, encoded once however many streams it goes to: a post fanned out to 10,000
 * subscribers is one buffer written 10,000 times, not 10,000 strings encoded.
 */
export class Frame {
  readonly bytes: Buffer;
  private chunked: Buffer | undefined;

  constructor(text: string) {
    this.bytes = Buffer.from(text, 'utf8');
  }

  /** The same bytes as one chunk of an HTTP/1.1 chunked body (RFC 9112 §7.1). */
  get chunk(): Buffer {
    this.chunked ??= Buffer.concat([Buffer.from(`${this.bytes.length.toString(16)}\r\n`, 'latin1'), this.bytes, CRLF]);
    return this.chunked;
  }
}

/** One SSE event: the item's id as `id`, so `Last-Event-ID` resumes after it. JSON has no raw newlines. */
export function eventFrame(id: string, event: string, data: unknown): Frame {
  return new Frame(`id: ${id}\nevent: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
}

const HEARTBEAT = new Frame(': heartbeat\n\n');

/**
 * Where a client resumes: the `Last-Event-ID` header (EventSource sends it on reconnect), or
 * `?last_event_id=` for clients that cannot set headers. Anything that is not an id we send is a
 * 400 problem, before the stream starts.
 */
export function lastEventId(req: Request): string | undefined {
  const header = req.headers['last-event-id'];
  const query = req.query.last_event_id;
  const value = typeof header === 'string' && header !== '' ? header : typeof query === 'string' && query !== '' ? query : undefined;
  if (query !== undefined && typeof query !== 'string') throw invalidEventId('last_event_id was given more than once.');
  if (value === undefined) return undefined;
  if (!STREAM_ID.test(value)) throw invalidEventId(`${JSON.stringify(value.slice(0, 80))} is not an event id of this feed.`);
  return value;
}

function invalidEventId(detail: string): DomainError {
  return new DomainError('invalid-event-id', { detail, fields: { parameter: 'Last-Event-ID' } });
}

/** One open Server-Sent Events response. */
export class SseStream {
  private readonly stop = new AbortController();
  /** Aborts when the stream is over: the client left, or the server ended it. */
  readonly signal: AbortSignal = this.stop.signal;
  /** The same fact as `signal.aborted`, read once per frame: a plain field costs a fanout less than the signal's getter. */
  private over = false;
  /**
   * The socket, once the headers and the first chunk are out: from then on a frame is one write of
   * its shared chunk there, without the response's per-write framing and bookkeeping.
   */
  private direct: Socket | undefined;

  constructor(
    private readonly res: Response,
    readonly feed: Feed,
    private readonly maxBufferedBytes: number,
    private readonly onClose: (stream: SseStream) => void,
    /** Runs at each heartbeat; answers a reason to end the stream (a revoked token), or undefined. */
    readonly recheck?: () => Promise<EndReason | undefined>,
  ) {
    res.on('close', () => this.closed());
  }

  /**
   * Writes a frame; a client that lets more than the bound pile up is cut off, not buffered for.
   * This runs once per subscriber for every post (10,000 times in a row for 10,000 subscribers), so
   * it does as little as it can: the profile of a fanout is two thirds the kernel's socket writes.
   */
  write(frame: Frame): void {
    if (this.over) return;
    let socket = this.direct;
    if (socket === undefined) {
      const { res } = this;
      // Once the headers are out, a chunked body's next chunk can go straight to the socket: one
      // shared buffer and one write. The response writes nothing more of its own until it ends.
      if (res.chunkedEncoding && res.headersSent && res.socket?.writable) socket = this.direct = res.socket;
      else {
        res.write(frame.bytes);
        if (res.writableLength > this.maxBufferedBytes) this.end('slow_client');
        return;
      }
    }
    if (!socket.writable) return;
    socket.write(frame.chunk);
    // The response holds nothing of its own once direct, so the socket's buffer is all that waits.
    if (socket.writableLength > this.maxBufferedBytes) this.end('slow_client');
  }

  /** Ends the stream from the server's side, telling a client that still reads why. */
  end(reason: EndReason, event?: { event: string; data: unknown }): void {
    if (this.over) return;
    liveStreamsEnded.inc({ feed: this.feed, reason });
    if (reason === 'slow_client') {
      // Its buffers are full: waiting for it to read a goodbye would defeat the point.
      this.res.destroy();
    } else {
      if (event) this.res.write(`event: ${event.event}\ndata: ${JSON.stringify(event.data)}\n\n`);
      // A replica going away: reconnect soon (EventSource sends Last-Event-ID), and the balancer picks another.
      if (reason === 'shutdown') this.res.write(`retry: ${SHUTDOWN_RETRY_MS}\n: this server is shutting down; reconnect with Last-Event-ID\n\n`);
      this.res.end();
    }
    this.closed();
  }

  private closed(): void {
    if (this.over) return;
    this.over = true;
    this.stop.abort();
    this.onClose(this);
  }
}

/** Every live stream of this edge process: one heartbeat timer for all, and an end for all at shutdown. */
export class LiveStreams {
  private readonly streams = new Set<SseStream>();
  private readonly timer: NodeJS.Timeout;
  private closing = false;

  constructor(
    readonly options: LiveOptions,
    private readonly log: Logger,
  ) {
    this.timer = setInterval(() => this.heartbeat(), options.heartbeatMs);
    this.timer.unref();
  }

  get size(): number {
    return this.streams.size;
  }

  /** Answers 200 with the event-stream headers now, so the client knows it is subscribed. */
  open(req: Request, res: Response, feed: Feed, recheck?: () => Promise<EndReason | undefined>): SseStream {
    if (this.closing) {
      throw unavailable('This edge process is shutting down; reconnect, and another replica will answer.', 1);
    }
    const stream = new SseStream(res, feed, this.options.maxBufferedBytes, (s) => this.forget(s), recheck);
    this.streams.add(stream);
    liveSubscribers.inc({ feed });
    req.socket.setNoDelay(true);
    req.socket.setKeepAlive(true, 60_000);
    res.status(200);
    res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
    res.setHeader('Cache-Control', 'no-store, no-transform');
    res.setHeader('X-Accel-Buffering', 'no');
    // How long EventSource waits before reconnecting, then the first bytes: the stream is open.
    res.write(`retry: 2000\n: subscribed to ${feed}\n\n`);
    return stream;
  }

  private forget(stream: SseStream): void {
    if (this.streams.delete(stream)) liveSubscribers.dec({ feed: stream.feed });
  }

  private heartbeat(): void {
    for (const stream of this.streams) {
      stream.write(HEARTBEAT);
      if (stream.recheck && !stream.signal.aborted) {
        stream.recheck().then(
          (reason) => {
            if (reason) stream.end(reason, { event: 'end', data: { reason } });
          },
          (error: unknown) => this.log.warn({ err: error, feed: stream.feed }, 'live stream recheck failed; keeping the stream'),
        );
      }
    }
  }

  /** SIGTERM: end every stream so the server can drain; clients reconnect to another replica. */
  closeAll(): void {
    this.closing = true;
    clearInterval(this.timer);
    for (const stream of [...this.streams]) stream.end('shutdown');
  }
}
