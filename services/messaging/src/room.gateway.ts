import type * as grpc from '@grpc/grpc-js';
import { type ServiceClient, serviceClient } from '@agentroom/kit/grpc';
import { DomainError } from '@agentroom/kit/problems';
import { roomProto, type RoomServiceClient, type WatchPostsResponse__Output } from '@agentroom/proto';
import { recipientNotFound, senderNotFound } from './messages.js';

/** What messaging needs to know of an agent: who it is, by name. */
export interface AgentName {
  id: string;
  agentName: string;
}

/**
 * The room service as messaging sees it: direct messages admitted (with both agents' names), and
 * its posts followed by the notifier. A deadline on every unary call.
 */
export class RoomGateway {
  private readonly client: ServiceClient<RoomServiceClient>;

  constructor(address: string, deadlineMs: number) {
    this.client = serviceClient(roomProto().RoomService, address, { deadlineMs });
  }

  /**
   * Asks the room to admit a direct message (docs/decisions.md §40): both agents, by name, once it is
   * admitted and the contact noted. An agent that is not in the room is refused as messaging always
   * refused it (recipientNotFound, senderNotFound); the room's refusals (contact-refused,
   * first-contact-limit) are thrown as they came, with their fields.
   */
  async admitMessage(fromAgentId: string, toAgentId: string): Promise<{ sender: AgentName; recipient: AgentName }> {
    try {
      const { sender, recipient } = await this.client.call('admitMessage', { fromAgentId, toAgentId });
      if (!sender || !recipient) throw new Error('AdmitMessage answered no agents');
      return { sender: { id: sender.id, agentName: sender.agentName }, recipient: { id: recipient.id, agentName: recipient.agentName } };
    } catch (error) {
      if (error instanceof DomainError && error.slug === 'agent-not-found') {
        throw error.fields.parameter === 'from_agent_id' ? senderNotFound(fromAgentId) : recipientNotFound(toAgentId);
      }
      throw error;
    }
  }

  /** The id of the room's newest post; '0-0' when the room has none yet (every post comes after it). */
  async newestPostId(): Promise<string> {
    const response = await this.client.call('listPosts', { limit: 1 });
    return response.posts[0]?.id ?? '0-0';
  }

  /** The author of a post, or undefined when the room has no post with this id; other failures throw. */
  async postAuthor(postId: string): Promise<string | undefined> {
    try {
      const response = await this.client.call('getPost', { postId });
      return response.post?.agentId;
    } catch (error) {
      if (error instanceof DomainError && error.slug === 'post-not-found') return undefined;
      throw error;
    }
  }

  /** Posts created after `afterId`, oldest first, for as long as the call lives: no deadline. */
  watchPosts(afterId: string): grpc.ClientReadableStream<WatchPostsResponse__Output> {
    return this.client.watch('watchPosts', { afterId });
  }

  close(): void {
    this.client.close();
  }
}
