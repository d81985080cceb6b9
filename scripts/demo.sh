#!/usr/bin/env bash
# The Kerf demo: a simulated cluster (kerf-sim) with a dev hub, three workloads of a
# shop, one RightsizingPolicy, and the agent running against it with `kerf-agent run`.
# Needs kubectl on PATH. Stops everything it started on exit.
#
#   scripts/demo.sh            # run the demo (about a minute)
#   KERF_DEMO_SECONDS=300 scripts/demo.sh   # watch for longer
set -euo pipefail
cd "$(dirname "$0")/.."

command -v kubectl >/dev/null || { echo "demo: kubectl is needed on PATH" >&2; exit 1; }

echo "== building kerf-sim and kerf-agent"
cargo build -q -p kerf-sim -p kerf-agent
bin="${CARGO_TARGET_DIR:-target}/debug"

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "== starting the simulated cluster and the dev hub"
"$bin/kerf-sim" serve --kubeconfig "$work/kubeconfig" --hub-file examples/demo/hub.yaml \
  >"$work/sim.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
  grep -q "dev hub http" "$work/sim.log" 2>/dev/null && [ -s "$work/kubeconfig" ] && break
  sleep 0.1
done
hub=$(grep -o 'dev hub http://[0-9.:]*' "$work/sim.log" | head -n1 | cut -d' ' -f3)
[ -n "$hub" ] || { echo "demo: kerf-sim did not start:" >&2; cat "$work/sim.log" >&2; exit 1; }
export KUBECONFIG="$work/kubeconfig"
echo "   cluster: $(kubectl config view -o jsonpath='{.clusters[0].cluster.server}')   hub: $hub"

echo "== installing the CRDs, the workloads and the policy"
kubectl apply -f config/crds/ >/dev/null
kubectl create namespace kerf-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl apply -f examples/demo/workloads.yaml >/dev/null
kubectl wait --for=condition=Available deployment --all -n shop --timeout=60s >/dev/null
kubectl apply -f examples/demo/policy.yaml >/dev/null
kubectl get deployments -n shop

echo "== starting the agent (kerf-agent run)"
"$bin/kerf-agent" run --cluster-name demo --namespace kerf-system --hub-url "$hub" \
  --hub-poll-interval 2s --metrics-addr 127.0.0.1:0 --webhook-addr 127.0.0.1:0 \
  --leader-election false >"$work/agent.log" 2>&1 &
pids+=($!)

deadline=$((SECONDS + ${KERF_DEMO_SECONDS:-45}))
while [ $SECONDS -lt $deadline ]; do
  sleep 5
  echo "== kubectl get rsr -A   ($(date +%T))"
  kubectl get rsr -A
done

echo "== pods of checkout (in-place: resized, template untouched)"
kubectl get pods -n shop -l app=checkout \
  -o custom-columns='POD:.metadata.name,CPU:.spec.containers[0].resources.requests.cpu,MEMORY:.spec.containers[0].resources.requests.memory'
echo "== template of catalog (rollout: patched under field manager kerf)"
kubectl get deployment catalog -n shop \
  -o jsonpath='{.spec.template.spec.containers[0].resources}{"\n"}'
echo "== kubectl describe rsr checkout -n shop"
kubectl describe rsr checkout -n shop | sed -n "1,60p" || true
echo "== the agent's log is in the demo's temporary directory while it runs; last lines:"
tail -n "${KERF_DEMO_LOG_LINES:-5}" "$work/agent.log"
