# The broker's image: `docker build -t mcp-connect-broker .`, then run it with the environment the
# docs/configuration.md describes (compose.yaml runs two of them on PostgreSQL behind Caddy).
#
# Three stages on one Debian release (bookworm) and one Node major, so the better-sqlite3 addon
# compiled in the full image loads in the slim one (same glibc, same Node ABI):
#   build    the dev dependencies and `npm run build` (TypeScript → dist/)
#   deps     the production dependencies alone; better-sqlite3 compiles here with the python3, make
#            and g++ the full node image ships, so the runtime image needs no compiler
#   runtime  the slim image: node_modules from deps, dist/ from build, the files the broker reads
#
# test/system/production-install.test.ts runs these stages' COPY and npm steps in temporary folders
# (no container engine there), starts CMD and runs HEALTHCHECK against it; the rest of this file
# (base images, user, ownership) it checks as text.
#
# The base images are pinned by digest (the tag before it is for the reader; Docker pulls by the
# digest): a rebuild gets the same bytes, and a tag moved on the registry changes nothing here until
# someone moves the digest. The digests are the multi-platform index digests of the tags as
# published on 2026-01-14 (Node 20.20.0 on bookworm). To update them (for a Node or Debian security
# release), look the tags' current index digests up and replace both, in one commit:
#   docker buildx imagetools inspect node:20-bookworm        # the "Digest:" line
#   docker buildx imagetools inspect node:20-bookworm-slim
# (`docker pull <tag>` prints the same digest). Keep build/deps and runtime on one Node major and one
# Debian release, then build the image and run the tests.

FROM node:20-bookworm@sha256:3680462e16df266d30b103a3e38e2bc315bf917d0ab873fbddbee437bf0bd2d0 AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json tsconfig.client.json ./
COPY src ./src
RUN npm run build

FROM node:20-bookworm@sha256:3680462e16df266d30b103a3e38e2bc315bf917d0ab873fbddbee437bf0bd2d0 AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund

FROM node:20-bookworm-slim@sha256:6c51af7dc83f4708aaac35991306bca8f478351cfd2bda35750a62d7efcf05bb AS runtime
# HOST=0.0.0.0: inside a container the loopback default would be unreachable from outside it.
# The SQLite file lives in /data (mount a volume there); set DATABASE_URL for PostgreSQL instead.
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATABASE_PATH=/data/broker.db
WORKDIR /app
# The application stays root-owned and read-only to the user it runs as; only /data is writable.
COPY package.json package-lock.json ./
COPY scripts ./scripts
COPY views ./views
COPY public ./public
COPY migrations ./migrations
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# 1000 is the `node` user of the official image, numeric so that a platform can check it is not root
# (Kubernetes runAsNonRoot). A named volume mounted on /data starts with this ownership.
RUN mkdir -p /data && chown 1000:1000 /data && chmod 0700 /data
USER 1000:1000
EXPOSE 3000
# No curl in the slim image: Node's own fetch. /healthz answers whatever the Host header says.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Exec form, node itself as PID 1: the runtime's SIGTERM reaches the broker's shutdown handler
# (held calls answered, callbacks in flight finished, database closed) with no shell or npm between.
STOPSIGNAL SIGTERM
CMD ["node", "dist/main.js"]
