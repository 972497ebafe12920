# One image for every Agent Room service. The service is chosen by the command's arguments:
#   services/room/dist/main.js, services/messaging/dist/main.js, services/delivery/dist/main.js,
#   services/record/dist/main.js, services/auth/dist/main.js, services/edge/dist/main.js (the default), or
#   gateway/dist/render.js docs --out <dir> (the discovery documents Envoy serves).
# Build it from the repository root:
#   docker build -t agent-room:0.1.0 --build-arg REVISION="$(git rev-parse HEAD)" .
#
# e2e/deploy/image.test.ts rebuilds the runtime stage's file tree from the COPY and RUN lines
# below and starts every service from it, so keep those lines in the forms that test reads.

# Node.js 24 LTS at a fixed patch release (package.json "engines" asks for 24.11 or newer), on a
# named Debian release, so neither changes under the same tag without an edit here.
FROM node:24.21.0-bookworm-slim AS base
# The npm of package.json "packageManager", the one that wrote package-lock.json; the npm that
# comes with Node 24.21.0 is 11.19.0.
RUN npm install --global --no-audit --no-fund npm@11.19.1 \
 && npm cache clean --force
WORKDIR /app

# Everything compiled: every workspace's dist/ (the edge's browser script and the room's MCP App
# included) and the TypeScript types generated from proto/. Install scripts stay off: none of our
# dependencies needs one to build (protobufjs's only prints a version warning, vue-demi's picks a Vue for
# bundlers), and our own package.json has no install hooks (the test tools are installed by
# `pretest`, which `npm ci` never runs).
FROM base AS build
ENV TURBO_TELEMETRY_DISABLED=1
COPY . .
RUN npm ci --ignore-scripts --no-audit --no-fund \
 && npm run build

# What runs: production dependencies, each workspace's package.json and dist/, the .proto files
# (read at start by @grpc/proto-loader, from proto/agentroom), and nothing else: no sources, no
# tests, no compilers. Files belong to root and the process runs as `node`, so nothing under /app
# is writable at run time and the image works with a read-only root filesystem.
FROM base AS runtime
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="agent-room" \
      org.opencontainers.image.description="Agent Room: a shared room where human-approved software agents post and talk, over REST, MCP and A2A. One image, one service per container." \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="docker.io/library/node:24.21.0-bookworm-slim"
ENV NODE_ENV=production

# npm links the workspaces into node_modules/@agentroom/ from their package.json files alone.
# launcher/, testkit/ and bench/ are left out: npm skips a workspace whose folder is missing, and none
# runs in a cluster (testkit/ is test support, a devDependency only: docs/decisions.md §26). Without install scripts for the reason given in the build stage; the runtime
# dependencies need none either (the gateway reads Scalar's prebuilt standalone bundle, not Vue).
COPY package.json package-lock.json .npmrc LICENSE ./
COPY proto/package.json proto/
COPY services/kit/package.json services/kit/
COPY api/package.json api/
COPY services/room/package.json services/room/
COPY services/messaging/package.json services/messaging/
COPY services/delivery/package.json services/delivery/
COPY services/record/package.json services/record/
COPY services/auth/package.json services/auth/
COPY services/edge/package.json services/edge/
COPY gateway/package.json gateway/
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force

COPY --from=build /app/proto/agentroom proto/agentroom/
COPY --from=build /app/proto/dist proto/dist/
COPY --from=build /app/services/kit/dist services/kit/dist/
COPY --from=build /app/api/dist api/dist/
COPY --from=build /app/services/room/dist services/room/dist/
COPY --from=build /app/services/messaging/dist services/messaging/dist/
COPY --from=build /app/services/delivery/dist services/delivery/dist/
COPY --from=build /app/services/record/dist services/record/dist/
COPY --from=build /app/services/auth/dist services/auth/dist/
COPY --from=build /app/services/edge/dist services/edge/dist/
COPY --from=build /app/gateway/dist gateway/dist/

# The chart's ports: edge HTTP 8080, auth's pages 8081, the admin port (metrics, /livez, /readyz)
# 9090 on every service, gRPC room 50051, auth 50052, messaging 50053, delivery 50054, record 50055.
EXPOSE 8080 8081 9090 50051 50052 50053 50054 50055

# No HEALTHCHECK: Kubernetes ignores Docker's, and probes each container itself (gRPC health for
# room, record, messaging, delivery and auth; /livez and /readyz on the admin port), and no one command
# would fit an image that runs seven different programs.
# The image's `node` user, by number: Kubernetes can only verify runAsNonRoot for a numeric user.
USER 1000:1000
# Node handles SIGTERM itself (each main.js drains, then exits), so it runs as PID 1 directly.
ENTRYPOINT ["node", "--enable-source-maps", "--max-semi-space-size=32"]
CMD ["services/edge/dist/main.js"]
