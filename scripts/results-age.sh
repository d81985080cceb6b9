#!/usr/bin/env bash
# Prints each proof recorded under bench/results/ (make soak): the commit it ran on, its
# date and exit code, and how many commits touching crates/ came after that commit (0: it
# measured the code as it is). Informational: it fails nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

shopt -s nullglob
files=(bench/results/*.json)
if [ ${#files[@]} -eq 0 ]; then
  echo "no recorded proofs in bench/results/"
  exit 0
fi
printf '%-18s %-12s %-21s %-5s %s\n' PROOF COMMIT DATE EXIT "CRATES COMMITS SINCE"
for f in "${files[@]}"; do
  read -r proof commit date code < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(r.get("proof", "?"), r.get("commit", "?"), r.get("date", "?"), r.get("exit_code", "?"))
' "$f")
  if git cat-file -e "$commit^{commit}" 2>/dev/null; then
    since="$(git rev-list --count "$commit..HEAD" -- crates/)"
  else
    since="commit not in this history"
  fi
  printf '%-18s %-12s %-21s %-5s %s\n' "$proof" "${commit:0:12}" "$date" "$code" "$since"
done
