import { type sendUnaryData, status } from '@grpc/grpc-js';

/** TEMPORARY (issue 38's base branch only; removed before it merges): a method its part has not built yet. */
export function pending(name: string): (call: unknown, callback: sendUnaryData<never>) => void {
  return (_call, callback) => callback({ code: status.UNIMPLEMENTED, details: `${name} is not built yet` }, null);
}
