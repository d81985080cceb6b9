# syntax=docker/dockerfile:1
# The kerf-agent image: a release build on a distroless runtime, running as the
# non-root user 65532.
#
#   make image                     # docker or podman; IMAGE=... IMAGE_TAG=... to rename
#   docker build --build-arg VERSION=0.1.0 -t ghcr.io/getkerf/kerf-agent:0.1.0 .

ARG RUST_VERSION=1.95
ARG VERSION=0.1.0

FROM rust:${RUST_VERSION}-bookworm AS builder
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY crates ./crates
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p kerf-agent --bin kerf-agent \
    && install -D -m 0755 target/release/kerf-agent /out/kerf-agent

# distroless/cc: glibc and libgcc only; TLS comes from rustls in the binary.
FROM gcr.io/distroless/cc-debian12:nonroot
ARG VERSION
ARG REVISION=unknown
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
