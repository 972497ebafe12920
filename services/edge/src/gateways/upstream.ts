import type * as grpc from '@grpc/grpc-js';
import { fromServiceError } from '@agentroom/kit';

/**
 * A gRPC watch stream (WatchPosts, WatchMessages) as the live feeds use it. The services send
 * initial metadata once the watch is positioned: from then on every new item reaches it.
 */
export interface UpstreamWatch<T> {
  /** Resolves once the service is positioned; rejects with the DomainError if the call fails first. */
  readonly positioned: Promise<void>;
  /** Each item, in order. */
  onItem(listener: (item: T) => void): void;
  /** Once, when the call ends for any reason other than `cancel()`; the error is a DomainError. */
  onEnd(listener: (error: Error) => void): void;
  cancel(): void;
}

/** Wraps a server-streaming call whose responses carry one item, converted by `convert`. */
export function upstreamWatch<Raw, T>(call: grpc.ClientReadableStream<Raw>, convert: (raw: Raw) => T | undefined): UpstreamWatch<T> {
  let cancelled = false;
  let ended = false;
  const endListeners: ((error: Error) => void)[] = [];
  const end = (error: Error): void => {
    if (ended || cancelled) return;
    ended = true;
    for (const listener of endListeners) listener(error);
  };
  const positioned = new Promise<void>((resolve, reject) => {
    call.once('metadata', () => resolve());
    call.once('error', (error) => reject(fromServiceError(error)));
    call.once('end', () => reject(fromServiceError(new Error('the watch ended before it was positioned'))));
  });
  // Nobody may be waiting on `positioned` any more when it rejects late.
  positioned.catch(() => undefined);
  call.on('error', (error) => end(fromServiceError(error)));
  call.on('end', () => end(fromServiceError(new Error('the watch ended'))));
  return {
    positioned,
    onItem(listener) {
      call.on('data', (raw: Raw) => {
        const item = convert(raw);
        if (item !== undefined) listener(item);
      });
    },
    onEnd(listener) {
      endListeners.push(listener);
    },
    cancel() {
      if (cancelled) return;
      cancelled = true;
      call.cancel();
    },
  };
}
