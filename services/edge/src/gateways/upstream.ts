import type * as grpc from '@grpc/grpc-js';
import { fromServiceError } from '@agentroom/kit/grpc';
import { DomainError } from '@agentroom/kit/problems';
import { compareStreamIds } from '@agentroom/kit/store';

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

/** How long a resuming watch keeps trying to open again before it gives up and ends. */
export const RESUME_BUDGET_MS = 5_000;
const RESUME_MIN_DELAY_MS = 100;
const RESUME_MAX_DELAY_MS = 1_000;

/** What ended a watch that another replica may carry on: the replica went away, or ended the stream without a word (its shutdown). */
function resumable(error: Error): boolean {
  return error instanceof DomainError && (error.slug === 'unavailable' || error.slug === 'internal');
}

/**
 * A watch of one feed that outlives the replica serving it. Once positioned, when its stream ends
 * (the replica was killed, restarted or drained), it is opened again right after the last item it
 * delivered, on whichever replica the client picks next: at once, then after 100 ms doubling to 1 s,
 * so its subscriber misses nothing, gets nothing twice, and sees no cut. It ends (`onEnd`) only when
 * no watch could be positioned again within `budgetMs`, or when the service refused the watch itself.
 * `positioned` is the first watch's: a feed that cannot start at all is still a refusal, not a retry.
 */
export function resumingWatch<T extends { id: string }>(
  open: (afterId: string | undefined) => UpstreamWatch<T>,
  afterId: string | undefined,
  budgetMs = RESUME_BUDGET_MS,
): UpstreamWatch<T> {
  const itemListeners: ((item: T) => void)[] = [];
  const endListeners: ((error: Error) => void)[] = [];
  let last = afterId;
  let positionedOnce = false;
  let failingSince: number | undefined;
  let delayMs = 0;
  let cancelled = false;
  let ended = false;
  let timer: NodeJS.Timeout | undefined;
  let current: UpstreamWatch<T>;

  const finish = (error: Error): void => {
    if (ended || cancelled) return;
    ended = true;
    for (const listener of endListeners) listener(error);
  };
  const attach = (watch: UpstreamWatch<T>): void => {
    current = watch;
    watch.onItem((item) => {
      // A watch opened again replays from `last`: anything at or before it was delivered already.
      if (last !== undefined && compareStreamIds(item.id, last) <= 0) return;
      last = item.id;
      for (const listener of itemListeners) listener(item);
    });
    watch.positioned.then(
      () => {
        if (watch !== current) return;
        positionedOnce = true;
        failingSince = undefined;
        delayMs = 0;
      },
      () => undefined,
    );
    watch.onEnd((error) => {
      if (watch !== current || cancelled || ended) return;
      failingSince ??= Date.now();
      if (!positionedOnce || !resumable(error) || Date.now() - failingSince >= budgetMs) {
        finish(error);
        return;
      }
      timer = setTimeout(() => {
        timer = undefined;
        if (!cancelled && !ended) attach(open(last));
      }, delayMs);
      delayMs = delayMs === 0 ? RESUME_MIN_DELAY_MS : Math.min(delayMs * 2, RESUME_MAX_DELAY_MS);
    });
  };

  const first = open(afterId);
  attach(first);
  return {
    positioned: first.positioned,
    onItem(listener) {
      itemListeners.push(listener);
    },
    onEnd(listener) {
      endListeners.push(listener);
    },
    cancel() {
      if (cancelled) return;
      cancelled = true;
      clearTimeout(timer);
      current.cancel();
    },
  };
}
