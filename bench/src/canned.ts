// The baselines' side of the bench: a response of the product captured byte for byte, handed to a
// baseline server (bare node:http, or an empty Express app) in its environment, and replayed by it.

/** One response, byte for byte, as a baseline must replay it. */
export interface CapturedResponse {
  status: number;
  contentType: string;
  body: Buffer;
}

/** Environment of a baseline server: the exact bytes, content type and status the product sent. */
const CANNED_ENV = { body: 'BENCH_BODY_BASE64', contentType: 'BENCH_CONTENT_TYPE', status: 'BENCH_STATUS' } as const;

export async function capture(url: string, init?: RequestInit): Promise<CapturedResponse> {
  const response = await fetch(url, init);
  return {
    status: response.status,
    contentType: response.headers.get('content-type') ?? 'application/octet-stream',
    body: Buffer.from(await response.arrayBuffer()),
  };
}

/** In the parent: the environment that makes a baseline server replay `response`. */
export function cannedEnv(response: CapturedResponse): Record<string, string> {
  return { [CANNED_ENV.body]: response.body.toString('base64'), [CANNED_ENV.contentType]: response.contentType, [CANNED_ENV.status]: String(response.status) };
}

/** In a baseline server: the response it replays. */
export function cannedResponse(): CapturedResponse {
  return {
    body: Buffer.from(process.env[CANNED_ENV.body] ?? '', 'base64'),
    contentType: process.env[CANNED_ENV.contentType] ?? 'application/octet-stream',
    status: Number(process.env[CANNED_ENV.status] ?? '200'),
  };
}
