#!/usr/bin/env bash
# One version for the crate, the binary, the chart and the image (docs/versioning.md).
#
#   scripts/release.sh check      # print the version; fail when the files disagree
#   scripts/release.sh 0.2.0      # set every version to 0.2.0, date the CHANGELOG's
#                                 # Unreleased section, print the tag to push
#   make release VERSION=0.2.0    # the same
#   scripts/release.sh notes 0.2.0  # the CHANGELOG section of 0.2.0 (the release's notes)
#
# The files: Cargo.toml ([workspace.package] version) and the lock files, the chart's
# version and appVersion, values.yaml's image.tag, the Dockerfile's VERSION default, and
# CHANGELOG.md. KERF_RELEASE_ROOT names another copy of the repository (the tests use it).
set -euo pipefail

root="${KERF_RELEASE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}"
repo_url="https://github.com/getkerf/kerf-agent"
# MAJOR.MINOR.PATCH with an optional pre-release; no build metadata, as an image tag
# cannot carry its `+`.
semver='^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$'

die() {
  echo "release: $*" >&2
  exit 1
}

# name<TAB>version, one line per place a version is written.
versions() {
  local cargo chart app tag docker
  cargo=$(sed -n '/^\[workspace\.package\]/,/^\[/ s/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml")
  chart=$(sed -n 's/^version: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$root/charts/kerf-agent/Chart.yaml")
  app=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$root/charts/kerf-agent/Chart.yaml")
  tag=$(sed -n '/^image:/,/^[^ ]/ s/^  tag: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$root/charts/kerf-agent/values.yaml")
  docker=$(sed -n 's/^ARG VERSION=\(.*\)$/\1/p' "$root/Dockerfile")
  printf '%s\t%s\n' "Cargo.toml [workspace.package] version" "$cargo" \
    "charts/kerf-agent/Chart.yaml version" "$chart" \
    "charts/kerf-agent/Chart.yaml appVersion" "$app" \
    "charts/kerf-agent/values.yaml image.tag" "$tag" \
    "Dockerfile ARG VERSION" "$docker"
  local lock name
  for lock in Cargo.lock fuzz/Cargo.lock; do
    [ -f "$root/$lock" ] || continue
    for name in kerf-agent kerf-api kerf-decide; do
      printf '%s\t%s\n' "$lock $name" \
        "$(sed -n "/^name = \"$name\"\$/{n;s/^version = \"\(.*\)\"\$/\1/p}" "$root/$lock")"
    done
  done
}

# Prints the one version every file carries; fails, naming each file, when they differ.
check() {
  local all want
  all=$(versions)
  want=$(head -n 1 <<<"$all" | cut -f 2)
  [ -n "$want" ] || die "no version in Cargo.toml's [workspace.package]"
  if awk -F '\t' -v want="$want" '$2 != want { bad = 1 } END { exit !bad }' <<<"$all"; then
    echo "release: the versions disagree:" >&2
    awk -F '\t' '{ printf "  %-45s %s\n", $1, ($2 == "" ? "(none)" : $2) }' <<<"$all" >&2
    exit 1
  fi
  echo "$want"
}

# Renames CHANGELOG.md's Unreleased section to `[$1] - date` under a new, empty
# Unreleased section, and points the link references at the new tag.
date_changelog() {
  local version=$1 previous=$2 today
  today="${KERF_RELEASE_DATE:-$(date -u +%F)}"
  local compare="$repo_url/releases/tag/v$version"
  grep -q "^## \[$previous\]" "$root/CHANGELOG.md" && compare="$repo_url/compare/v$previous...v$version"
  awk -v v="$version" -v d="$today" -v url="$repo_url" -v link="$compare" '
    /^## \[Unreleased\]/ { print; print ""; print "## [" v "] - " d; next }
    /^\[Unreleased\]: / {
      print "[Unreleased]: " url "/compare/v" v "...HEAD"
      print "[" v "]: " link
      next
    }
    { print }
  ' "$root/CHANGELOG.md" >"$root/CHANGELOG.md.new"
  mv "$root/CHANGELOG.md.new" "$root/CHANGELOG.md"
}

# Whether semantic version $1 comes before $2: by MAJOR.MINOR.PATCH, then a pre-release
# before its release, then the pre-releases in version order.
precedes() {
  local a=${1%%-*} b=${2%%-*}
  if [ "$a" != "$b" ]; then
    [ "$(printf '%s\n%s\n' "$a" "$b" | sort -V | head -n 1)" = "$a" ]
  elif [ "$1" = "$2" ] || [ "$1" = "$a" ]; then
    return 1
  else
    [ "$2" = "$b" ] || [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$1" ]
  fi
}

# Whether CHANGELOG.md's Unreleased section says anything.
unreleased_has_notes() {
  awk '/^## \[Unreleased\]/ { on = 1; next } /^## / { on = 0 } on && /[^[:space:]]/ { n++ }
    END { exit !n }' "$root/CHANGELOG.md"
}

set_versions() {
  local v=$1
  sed -i "/^\[workspace\.package\]/,/^\[/ s/^version = \".*\"$/version = \"$v\"/" "$root/Cargo.toml"
  sed -i -e "s/^version: .*/version: $v/" -e "s/^appVersion: .*/appVersion: \"$v\"/" \
    "$root/charts/kerf-agent/Chart.yaml"
  sed -i "/^image:/,/^[^ ]/ s/^  tag: .*/  tag: \"$v\"/" "$root/charts/kerf-agent/values.yaml"
  sed -i "s/^ARG VERSION=.*/ARG VERSION=$v/" "$root/Dockerfile"
  # Cargo rewrites the workspace's own entries of its lock file.
  cargo update --workspace --offline --quiet --manifest-path "$root/Cargo.toml"
  # The fuzz crate's lock names the workspace's crates at their version: rewritten in place.
  # (cargo would resolve the fuzz crate's whole graph, libfuzzer-sys included, which a
  # machine that never built the fuzz targets does not have offline.)
  if [ -f "$root/fuzz/Cargo.lock" ]; then
    awk -v v="$v" '
      /^name = "kerf-(agent|api|decide)"$/ { ours = 1; print; next }
      ours && /^version = / { print "version = \"" v "\""; ours = 0; next }
      { ours = 0; print }' "$root/fuzz/Cargo.lock" >"$root/fuzz/Cargo.lock.new"
    mv "$root/fuzz/Cargo.lock.new" "$root/fuzz/Cargo.lock"
  fi
}

release() {
  local version=$1 current
  [[ "$version" =~ $semver ]] ||
    die "VERSION=$version is not a semantic version MAJOR.MINOR.PATCH[-PRERELEASE] (e.g. 0.2.0, 1.0.0-rc.1)"
  current=$(check)
  if grep -q "^## \[$version\]" "$root/CHANGELOG.md"; then
    die "CHANGELOG.md already has a $version section: that version is released"
  fi
  precedes "$version" "$current" && die "VERSION=$version is older than the current $current"
  grep -q '^## \[Unreleased\]' "$root/CHANGELOG.md" || die "CHANGELOG.md has no '## [Unreleased]' section"
  unreleased_has_notes || die "CHANGELOG.md's Unreleased section is empty: say what changed first"
  set_versions "$version"
  date_changelog "$version" "$current"
  [ "$(check)" = "$version" ] || die "the versions do not agree after the update"
  cat <<EOF
release: every version is $version. Review, commit and push the tag:
  git commit -am "Release $version"
  git tag -a v$version -m "kerf-agent $version"
  git push origin v$version
EOF
}

# Prints CHANGELOG.md's section of version $1, without its heading; fails without one.
notes() {
  awk -v v="$1" '
    index($0, "## [" v "] ") == 1 { on = 1; found = 1; next }
    /^## \[/ || /^\[[^]]*\]: / { on = 0 }
    on { print }
    END { exit !found }
  ' "$root/CHANGELOG.md" | sed -e '/./,$!d' || die "CHANGELOG.md has no section for $1"
}

case "${1:-}" in
  "") die "usage: scripts/release.sh check | notes VERSION | VERSION" ;;
  check) check ;;
  notes) notes "${2:-}" ;;
  *) release "$1" ;;
esac
