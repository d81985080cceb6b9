#!/usr/bin/env bash
# Runs one fuzz target of fuzz/ (cargo-fuzz, libFuzzer) for a bounded time.
#
#   scripts/fuzz.sh TARGET SECONDS [LIBFUZZER_FLAG...]   # SECONDS 0: no time limit
#   scripts/fuzz.sh --list                               # the targets, one a line
#
# It uses `cargo +nightly fuzz` when a nightly toolchain is installed, else the stable
# toolchain with RUSTC_BOOTSTRAP=1. Targets are built without a sanitizer (Kerf's crates
# forbid unsafe code; KERF_FUZZ_SANITIZER=address asks for AddressSanitizer on nightly),
# in release mode with debug assertions and overflow checks. The build goes to
# $CARGO_TARGET_DIR (default: fuzz/target).
#
# Inputs it finds go to $KERF_FUZZ_CORPUS/TARGET (default fuzz/corpus-grown, not kept in
# git); the seeds in fuzz/corpus/TARGET are read only. A crash leaves its input in
# fuzz/artifacts/TARGET/ and fails the run. Example of a long run:
#   scripts/fuzz.sh quantity 0 -runs=10000000
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo-fuzz >/dev/null || {
  echo "fuzz: cargo-fuzz is needed: cargo install cargo-fuzz --locked" >&2
  exit 1
}

if cargo +nightly --version >/dev/null 2>&1; then
  fuzz=(cargo +nightly fuzz)
  sanitizer="${KERF_FUZZ_SANITIZER:-none}"
else
  export RUSTC_BOOTSTRAP=1
  fuzz=(cargo fuzz)
  sanitizer=none
fi

if [ "${1:-}" = "--list" ]; then
  exec "${fuzz[@]}" list
fi
if [ $# -lt 2 ]; then
  echo "usage: scripts/fuzz.sh TARGET SECONDS [LIBFUZZER_FLAG...] | --list" >&2
  exit 2
fi
target="$1"
seconds="$2"
shift 2

target_dir="${CARGO_TARGET_DIR:-$PWD/fuzz/target}"
grown="${KERF_FUZZ_CORPUS:-$PWD/fuzz/corpus-grown}/$target"
artifacts="$PWD/fuzz/artifacts/$target"
mkdir -p "$grown" "$artifacts"

run=("${fuzz[@]}" run --sanitizer "$sanitizer" --target-dir "$target_dir" "$target"
  "$grown" "$PWD/fuzz/corpus/$target" --
  -max_total_time="$seconds" -artifact_prefix="$artifacts/" -print_final_stats=1 "$@")
if [ -z "${KERF_RESULT_FILE:-}" ]; then
  exec "${run[@]}"
fi
# Under scripts/soak.sh: the executions and the outcome as JSON in $KERF_RESULT_FILE.
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
set +e
"${run[@]}" 2>&1 | tee "$log"
code=${PIPESTATUS[0]}
set -e
runs="$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)"
secs="$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -n 1)"
crash="$(grep -c '^==[0-9]*== ERROR: libFuzzer\|^thread .* panicked' "$log" || true)"
printf '{"target": "%s", "executions": %s, "seconds": %s, "crashes": %s, "flags": "%s"}\n' \
  "$target" "${runs:-0}" "${secs:-null}" "${crash:-0}" "$*" >"$KERF_RESULT_FILE"
exit "$code"
