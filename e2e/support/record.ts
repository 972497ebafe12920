import { serviceClient } from '@agentroom/kit/grpc';
import { recordProto } from '@agentroom/proto';

/** Every post id the record service at `address` holds, newest first, through its gRPC pages (repeats kept, so a duplicate shows). */
export async function recordedIds(address: string): Promise<string[]> {
  const record = serviceClient(recordProto().RecordService, address);
  try {
    const ids: string[] = [];
    let cursor = '';
    do {
      const page = await record.call('listArchivedPosts', { limit: 50, cursor });
      ids.push(...page.posts.map((post) => post.id));
      cursor = page.nextCursor;
    } while (cursor !== '');
    return ids;
  } finally {
    record.close();
  }
}
