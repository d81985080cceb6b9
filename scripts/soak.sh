#!/usr/bin/env bash
# Runs one long proof and records it as bench/results/NAME.json (`make soak`).
#
#   scripts/soak.sh NAME COMMAND [ARG...]
#
# The command is given KERF_RESULT_FILE, a file where it writes its own counts as JSON
# (e2e_idle, the kill sweep and the scale example do). The record holds the commit it ran
# on (and whether the tree had uncommitted changes), the date, the machine (cores, load
# average before and after), the command, its exit code and duration, and those counts.
# A failed proof is recorded too, and fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 2 ]; then
  echo "usage: scripts/soak.sh NAME COMMAND [ARG...]" >&2
  exit 2
fi
name="$1"
shift
out="bench/results/$name.json"
mkdir -p bench/results
counts="$(mktemp)"
trap 'rm -f "$counts"' EXIT

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
start="$(date +%s)"
set +e
KERF_RESULT_FILE="$counts" "$@"
code=$?
set -e
end="$(date +%s)"

python3 - "$out" "$name" "$code" "$start" "$end" "$load_before" "$counts" "$*" <<'PY'
import json, os, subprocess, sys, datetime
out, name, code, start, end, load_before, counts, command = sys.argv[1:]
def git(*a):
    return subprocess.run(["git", *a], capture_output=True, text=True).stdout.strip()
try:
    with open(counts) as f:
        data = json.load(f)
except (OSError, ValueError):
    data = None
record = {
    "proof": name,
    "commit": git("rev-parse", "HEAD"),
    # The records of earlier proofs of the same run are not changes to what ran.
    "uncommitted_changes": bool(git("status", "--porcelain", "--untracked-files=no", "--",
                                    ".", ":(exclude)bench/results")),
    "date": datetime.datetime.fromtimestamp(int(start), datetime.timezone.utc)
        .strftime("%Y-%m-%dT%H:%M:%SZ"),
    "machine": {
        "cores": os.cpu_count(),
        "loadavg_before": load_before,
        "loadavg_after": " ".join(open("/proc/loadavg").read().split()[:3]),
    },
    "command": command,
    "exit_code": int(code),
    "duration_s": int(end) - int(start),
    "counts": data,
}
with open(out, "w") as f:
    json.dump(record, f, indent=1)
    f.write("\n")
print(f"soak: {name}: exit {code} in {record['duration_s']} s -> {out}")
PY
exit "$code"
