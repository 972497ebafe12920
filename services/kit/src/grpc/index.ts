// @agentroom/kit/grpc: gRPC servers and clients between the services: deadlines, retries, health, problems across the hop.
export * from './status.js';
export * from './server.js';
export * from './client.js';
export * from './call-key.js';
