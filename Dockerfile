# syntax=docker/dockerfile:1
# The kerf-agent image: a release build on a distroless runtime, running as the
# non-root user 65532.
#
#   make image                     # docker, podman or buildah; IMAGE=... IMAGE_TAG=... to rename
#   docker build --build-arg REVISION=$(git rev-parse HEAD) -t ghcr.io/getkerf/kerf-agent:dev .
#
# VERSION is the release's (scripts/release.sh keeps it equal to Cargo.toml's); REVISION
# names the commit in the image's labels and in `kerf-agent --version`.

# The workspace's rust-version (Cargo.toml): the image is built with the oldest Rust the
# agent supports, so every release proves it (.ci/run checks the two agree).
ARG RUST_VERSION=1.90
ARG VERSION=0.1.0
ARG REVISION=unknown

FROM rust:${RUST_VERSION}-bookworm AS builder
ARG REVISION
ARG TARGETPLATFORM
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
# The settings built into the agent's jemalloc (kerf_agent::runtime::allocator_settings).
COPY .cargo ./.cargo
COPY crates ./crates
# The e2e package is a workspace member: cargo loads every member's manifest and targets.
COPY tests ./tests
# No .git in the build context: the commit comes from REVISION (crates/kerf-agent/build.rs).
# One target cache per platform: a multi-platform build runs both at once. jemalloc's page
# size is fixed when it is built: 64 KiB on arm64 runs on kernels with 4 KiB and 64 KiB
# pages alike.
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/src/target,id=kerf-target-${TARGETPLATFORM} \
    if [ "$TARGETPLATFORM" = linux/arm64 ]; then export JEMALLOC_SYS_WITH_LG_PAGE=16; fi \
    && KERF_COMMIT="$(printf %.7s "$REVISION")" \
    cargo build --release --locked -p kerf-agent --bin kerf-agent \
    && install -D -m 0755 target/release/kerf-agent /out/kerf-agent

# distroless/cc: glibc and libgcc only; TLS comes from rustls in the binary.
FROM gcr.io/distroless/cc-debian12:nonroot
ARG VERSION
ARG REVISION
LABEL org.opencontainers.image.title="kerf-agent" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.description="The Kerf rightsizing agent" \
      org.opencontainers.image.source="https://github.com/getkerf/kerf-agent" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=builder /out/kerf-agent /usr/local/bin/kerf-agent
USER 65532:65532
EXPOSE 8080 8443
ENTRYPOINT ["/usr/local/bin/kerf-agent"]
CMD ["run"]
