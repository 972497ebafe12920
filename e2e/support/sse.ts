import { createParser, type EventSourceMessage } from 'eventsource-parser';

/**
 * A Server-Sent Events client over fetch, parsed by eventsource-parser: what an agent without a
 * browser uses. It records events and comments, and can wait for a number of them.
 */
export class SseClient {
  readonly events: EventSourceMessage[] = [];
  readonly comments: string[] = [];
  /** Resolves when the server ends the stream (or the connection drops). */
  readonly ended: Promise<void>;
  private readonly controller = new AbortController();
  private waiters: (() => void)[] = [];

  private constructor(readonly response: Response) {
    const parser = createParser({
      onEvent: (event) => {
        this.events.push(event);
        this.wake();
      },
      onComment: (comment) => {
        this.comments.push(comment);
        this.wake();
      },
    });
    const body = response.body;
    if (!body) throw new Error('the stream has no body');
    this.ended = (async () => {
      const decoder = new TextDecoder();
      const reader = body.getReader();
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          parser.feed(decoder.decode(value, { stream: true }));
        }
      } catch {
        // Aborted by close(), or cut off by the server.
      }
      this.wake();
    })();
  }

  /** Opens a stream; a non-200 answer is returned as the Response, not thrown. */
  static async open(url: string, headers: Record<string, string> = {}): Promise<SseClient | Response> {
    const controller = new AbortController();
    const response = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: controller.signal });
    if (response.status !== 200) return response;
    const client = new SseClient(response);
    client.controller.signal.addEventListener('abort', () => controller.abort());
    return client;
  }

  /** Opens a stream that must answer 200. */
  static async connect(url: string, headers: Record<string, string> = {}): Promise<SseClient> {
    const opened = await SseClient.open(url, headers);
    if (opened instanceof Response) throw new Error(`${url} answered ${opened.status}: ${await opened.text()}`);
    return opened;
  }

  /** Waits until `count` events have arrived (all of them, not only new ones). */
  async waitForEvents(count: number, timeoutMs = 5_000): Promise<EventSourceMessage[]> {
    await this.until(
      () => this.events.length >= count,
      timeoutMs,
      () => `${this.events.length} of ${count} events`,
    );
    return this.events.slice(0, count);
  }

  async waitForComments(count: number, timeoutMs = 5_000): Promise<void> {
    await this.until(
      () => this.comments.length >= count,
      timeoutMs,
      () => `${this.comments.length} of ${count} comments`,
    );
  }

  close(): void {
    this.controller.abort();
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const waiter of waiters) waiter();
  }

  private async until(done: () => boolean, timeoutMs: number, progress: () => string): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!done()) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting: ${progress()}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }
}
