#!/usr/bin/env bash
# make image-archive: the agent image without a registry or a container daemon, written to
# dist/kerf-agent-<version>.oci.tar, an OCI image archive that `docker load`,
# `ctr images import` and `kind load image-archive` take.
#
# The root filesystem holds what distroless/cc-debian12 holds for a Rust binary: glibc
# (libc6), libgcc-s1, the CA certificates, the time zone database, and passwd and group
# entries for the user 65532 (nonroot). The packages are the build machine's own (its
# apt sources), so the glibc is the one the binary was linked against; they are unpacked
# with `dpkg-deb -x`, no maintainer script runs. umoci assembles the image.
#
#   KERF_AGENT_BIN=path   use this kerf-agent binary (default: cargo's release build)
#   KERF_TOOLS_CACHE=dir  where the downloaded packages are kept ($HOME/.cache/kerf-tools)
set -euo pipefail

cd "$(dirname "$0")/.."
name=ghcr.io/getkerf/kerf-agent
packages=(libc6 libgcc-s1 ca-certificates tzdata)
cache="${KERF_TOOLS_CACHE:-$HOME/.cache/kerf-tools}/debs"

die() {
  echo "image-archive: $*" >&2
  exit 1
}

need_tools() {
  local missing=()
  command -v umoci >/dev/null || missing+=(umoci)
  command -v skopeo >/dev/null || missing+=(skopeo)
  [ ${#missing[@]} -eq 0 ] && return
  [ "$(id -u)" = 0 ] || die "needs ${missing[*]} (Debian: apt-get install ${missing[*]})"
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The .deb files of $packages in $cache, downloaded when the cache lacks the candidate
# version; prints their paths.
debs() {
  mkdir -p "$cache"
  local uris
  uris=$(apt-get download --print-uris "${packages[@]}" 2>/dev/null) || {
    apt-get update -qq
    uris=$(apt-get download --print-uris "${packages[@]}")
  }
  local file missing=()
  while read -r _ file _; do
    [ -s "$cache/$file" ] || missing+=("$file")
  done <<<"$uris"
  if [ ${#missing[@]} -gt 0 ]; then
    (cd "$cache" && apt-get download -qq -o APT::Sandbox::User=root "${packages[@]}") ||
      { apt-get update -qq && (cd "$cache" && apt-get download -qq -o APT::Sandbox::User=root "${packages[@]}"); }
  fi
  awk -v dir="$cache" '{ print dir "/" $2 }' <<<"$(apt-get download --print-uris "${packages[@]}")"
}

# The root filesystem in $1: the packages, the CA bundle, the users and the binary $2.
rootfs() {
  local root=$1 bin=$2 deb
  for deb in $(debs); do
    dpkg-deb -x "$deb" "$root"
  done
  # update-ca-certificates' bundle, which the package's maintainer script would write.
  mkdir -p "$root/etc/ssl/certs"
  cat "$root"/usr/share/ca-certificates/mozilla/*.crt >"$root/etc/ssl/certs/ca-certificates.crt"
  cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
EOF
  printf '%s\n' root:x:0: nobody:x:65534: nonroot:x:65532: >"$root/etc/group"
  install -d -m 0700 -o 65532 -g 65532 "$root/home/nonroot"
  install -d -m 1777 "$root/tmp"
  install -D -m 0755 "$bin" "$root/usr/local/bin/kerf-agent"
  # Documentation and manual pages of the packages: not needed to run.
  rm -rf "$root/usr/share/doc" "$root/usr/share/man" "$root/usr/share/lintian"
}

# The docker-archive `manifest.json` of the OCI layout in $1, naming the image $2, as
# `docker save` writes it beside index.json: any docker loads the archive, whether or not
# it reads OCI layouts. The image manifest lists the config's digest first, then the layers'.
docker_manifest() {
  local layout=$1 ref=$2 manifest digests
  manifest=$(grep -o '"digest":"sha256:[0-9a-f]*"' "$layout/index.json" | head -n 1 | cut -d: -f3 | tr -d '"')
  digests=$(grep -o '"digest":"sha256:[0-9a-f]*"' "$layout/blobs/sha256/$manifest" | cut -d: -f3 | tr -d '"')
  [ -n "$digests" ] || die "cannot read the image manifest $manifest"
  local config layers
  config=$(head -n 1 <<<"$digests")
  layers=$(tail -n +2 <<<"$digests" | sed 's|.*|"blobs/sha256/&"|' | paste -sd, -)
  printf '[{"Config":"blobs/sha256/%s","RepoTags":["%s"],"Layers":[%s]}]\n' "$config" "$ref" "$layers"
}

main() {
  need_tools
  local version revision bin
  version=$(scripts/release.sh check)
  revision=$(git rev-parse HEAD 2>/dev/null || echo "${KERF_COMMIT:-unknown}")
  bin="${KERF_AGENT_BIN:-}"
  if [ -z "$bin" ]; then
    cargo build --release --locked -q -p kerf-agent --bin kerf-agent
    bin="$(cargo metadata --no-deps --format-version 1 |
      sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')/release/kerf-agent"
  fi
  [ -x "$bin" ] || die "no kerf-agent binary at $bin"

  work=$(mktemp -d) # global: the EXIT trap runs after main returns
  trap 'rm -rf "$work"' EXIT
  local image="$work/layout:$version"
  umoci init --layout "$work/layout"
  umoci new --image "$image"
  umoci unpack --image "$image" "$work/bundle" >/dev/null
  rootfs "$work/bundle/rootfs" "$bin"
  umoci repack --image "$image" "$work/bundle"
  local arch
  arch=$(dpkg --print-architecture)
  umoci config --image "$image" --os linux --architecture "$arch" \
    --config.user 65532:65532 --config.workingdir /home/nonroot \
    --config.entrypoint /usr/local/bin/kerf-agent --config.cmd run \
    --config.env PATH=/usr/local/bin:/usr/bin:/bin \
    --config.env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    --config.exposedports 8080/tcp --config.exposedports 8443/tcp \
    --config.label org.opencontainers.image.title=kerf-agent \
    --config.label "org.opencontainers.image.version=$version" \
    --config.label "org.opencontainers.image.revision=$revision" \
    --config.label "org.opencontainers.image.description=The Kerf rightsizing agent" \
    --config.label org.opencontainers.image.source=https://github.com/getkerf/kerf-agent \
    --config.label org.opencontainers.image.licenses=Apache-2.0
  umoci gc --layout "$work/layout"
  mkdir -p dist
  local out="dist/kerf-agent-$version.oci.tar"
  rm -f "$out"
  # The archive names the image in full, in the OCI annotation and in containerd's, which
  # `docker load`, `ctr images import` and `kind load image-archive` read.
  skopeo copy -q "oci:$image" "oci:$work/archive:$name:$version"
  local ref="\"org.opencontainers.image.ref.name\":\"$name:$version\""
  sed -i "s|$ref|\"io.containerd.image.name\":\"$name:$version\",$ref|" "$work/archive/index.json"
  grep -q io.containerd.image.name "$work/archive/index.json" || die "cannot name the image in index.json"
  docker_manifest "$work/archive" "$name:$version" >"$work/archive/manifest.json"
  tar -C "$work/archive" --sort=name --owner=0 --group=0 --numeric-owner -cf "$out" \
    oci-layout index.json manifest.json blobs
  echo "$out ($name:$version, $arch, revision $revision)"
}

main "$@"
