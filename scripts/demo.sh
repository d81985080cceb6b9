#!/usr/bin/env bash
# The Kerf demo: a simulated cluster (kerf-sim) with a dev hub, three workloads of a
# shop, one RightsizingPolicy, and the agent running against it with `kerf-agent run`.
#
#   1. the workloads before, and what the hub recommends;
#   2. the agent applies: checkout in place, catalog by rollout (field manager `kerf`),
#      search stays in audit; each workload's before -> after;
#   3. one complete `kubectl describe rsr`;
#   4. an OOM kill injected into checkout with `kerf-sim fault`, and the rollback of its
#      memory that follows;
#   5. the savings report (`kerf-agent report`): requested, recommended, applied and
#      held back, per namespace and for the cluster.
#
# Needs kubectl and openssl on PATH (the webhook's certificate is generated at start).
# Stops everything it started on exit; the agent's log is kept in $KERF_DEMO_LOG
# (default: kerf-demo-agent.log in the temporary directory). About a minute after the build.
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in kubectl openssl; do
  command -v "$tool" >/dev/null || { echo "demo: $tool is needed on PATH" >&2; exit 1; }
done

echo "== building kerf-sim and kerf-agent"
cargo build -q -p kerf-sim -p kerf-agent
bin="${CARGO_TARGET_DIR:-target}/debug"
start=$SECONDS
log_keep="${KERF_DEMO_LOG:-${TMPDIR:-/tmp}/kerf-demo-agent.log}"

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -f "$work/agent.log" ] && cp "$work/agent.log" "$log_keep"
  rm -rf "$work"
}
trap cleanup EXIT

step() { printf '\n== %s\n' "$*"; }

# Waits up to $1 seconds for the shell condition $2; fails the demo with $3 otherwise.
wait_for() {
  local until=$((SECONDS + $1))
  while ! eval "$2" >/dev/null 2>&1; do
    if [ $SECONDS -ge $until ]; then
      echo "demo: timed out waiting for $3" >&2
      tail -n 20 "$work/agent.log" >&2 || true
      exit 1
    fi
    sleep 0.5
  done
}

phase() { kubectl get rsr "$1" -n shop -o jsonpath='{.status.phase}' 2>/dev/null; }

# CPU/memory requests of the first container: of the Deployment's template, and of its
# running pods (distinct values).
template_values() {
  kubectl get deployment "$1" -n shop \
    -o jsonpath='{.spec.template.spec.containers[0].resources.requests.cpu}/{.spec.template.spec.containers[0].resources.requests.memory}'
}
pod_values() {
  kubectl get pods -n shop -l "app=$1" \
    -o jsonpath='{range .items[*]}{.spec.containers[0].resources.requests.cpu}/{.spec.containers[0].resources.requests.memory}{"\n"}{end}' |
    sort -u | paste -sd' ' -
}

step "starting the simulated cluster and the dev hub"
# A self-signed certificate for the agent's webhook listener.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
  -subj "/CN=kerf-agent.kerf-system.svc" -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
  -keyout "$work/tls.key" -out "$work/tls.crt" 2>/dev/null
"$bin/kerf-sim" serve --kubeconfig "$work/kubeconfig" --hub-file examples/demo/hub.yaml \
  >"$work/sim.log" 2>&1 &
pids+=($!)
wait_for 20 'grep -q "dev hub http" "$work/sim.log" && [ -s "$work/kubeconfig" ]' "kerf-sim"
hub=$(grep -o 'dev hub http://[0-9.:]*' "$work/sim.log" | head -n1 | cut -d' ' -f3)
control=$(grep -o 'control listener http://[0-9.:]*' "$work/sim.log" | head -n1 | cut -d' ' -f3)
export KUBECONFIG="$work/kubeconfig"
echo "cluster $(kubectl config view -o jsonpath='{.clusters[0].cluster.server}'), hub $hub"

step "the shop before: requests of each workload, and what the hub recommends"
kubectl apply -f config/crds/ >/dev/null
kubectl create namespace kerf-system >/dev/null
kubectl apply -f examples/demo/workloads.yaml >/dev/null
kubectl wait --for=condition=Available deployment --all -n shop --timeout=60s >/dev/null
kubectl apply -f examples/demo/policy.yaml >/dev/null
declare -A before
for w in checkout catalog search; do before[$w]=$(template_values "$w"); done
kubectl get deployments -n shop -o custom-columns='WORKLOAD:.metadata.name,REPLICAS:.spec.replicas,CPU:.spec.template.spec.containers[0].resources.requests.cpu,MEMORY:.spec.template.spec.containers[0].resources.requests.memory,STRATEGY ANNOTATION:.metadata.annotations.kerf\.getkerf\.dev/strategy,MODE ANNOTATION:.metadata.annotations.kerf\.getkerf\.dev/mode'
echo "The hub recommends (examples/demo/hub.yaml): checkout 300m/384Mi, catalog 600m/768Mi,"
echo "search 400m/1536Mi. Policy shop (examples/demo/policy.yaml): auto-patch, in place."

step "starting the agent: kerf-agent run --cluster-name demo --hub-url $hub ..."
"$bin/kerf-agent" run --cluster-name demo --namespace kerf-system --hub-url "$hub" \
  --hub-poll-interval 2s --leader-election false \
  --metrics-addr 127.0.0.1:0 --webhook-addr 127.0.0.1:0 \
  --webhook-cert-file "$work/tls.crt" --webhook-key-file "$work/tls.key" \
  --log-format text >"$work/agent.log" 2>&1 &
pids+=($!)
wait_for 40 '[ "$(phase checkout)" = Applied ] && [ "$(phase catalog)" = Applied ] && [ -n "$(phase search)" ]' \
  "checkout and catalog to be Applied"
# The rollout replaces catalog's pods; wait until they all run the new template.
wait_for 30 '[ "$(pod_values catalog)" = "$(template_values catalog)" ]' "catalog's rollout"
echo "all three decided $((SECONDS - start))s after the build"

step "kubectl get rsr -A"
kubectl get rsr -A

step "before -> after"
row='%-9s %-11s %-9s %-9s %-12s %-13s %-14s %s\n'
# shellcheck disable=SC2059
printf "$row" WORKLOAD MODE STRATEGY PHASE BEFORE RECOMMENDED "TEMPLATE NOW" "PODS RUN NOW"
for w in checkout catalog search; do
  rsr=$(kubectl get rsr "$w" -n shop -o jsonpath='{.status.summary.mode} {.status.strategy.effective} {.spec.containers[0].requests.cpu}/{.spec.containers[0].requests.memory}')
  read -r mode strategy recommended <<<"$rsr"
  # shellcheck disable=SC2059
  printf "$row" "$w" "$mode" "$strategy" "$(phase "$w")" "${before[$w]}" "$recommended" \
    "$(template_values "$w")" "$(pod_values "$w")"
done
echo "checkout: its 3 pods were resized in place; the template keeps 500m/512Mi"
echo "catalog:  its template was changed (server-side apply) and rolled out"
echo "search:   audit only: the recommendation is reported, nothing changes"

step "catalog's template: the resource fields are owned by field manager kerf"
kubectl get deployment catalog -n shop --show-managed-fields \
  -o jsonpath='{range .metadata.managedFields[*]}{.manager}{"  "}{.operation}{"  "}{.fieldsV1.f:spec.f:template.f:spec.f:containers}{"\n"}{end}' |
  sed -e 's/{"k:{\\"name\\":\\"app\\"}":/container app: /' | grep -E '^kerf ' || {
  echo "demo: no managedFields entry of kerf on catalog" >&2; exit 1; }

step "kubectl describe rsr checkout -n shop"
kubectl describe rsr checkout -n shop

step "an OOM kill in checkout while its health watch runs (kerf-sim fault oom-kill)"
pod=$(kubectl get pods -n shop -l app=checkout -o jsonpath='{.items[0].metadata.name}')
"$bin/kerf-sim" fault --control "$control" oom-kill --namespace shop --pod "$pod" --container app
echo "OOM-killed container app of pod $pod"
wait_for 30 '[ "$(phase checkout)" = RolledBack ]' "checkout to roll back"
kubectl get rsr checkout -n shop
printf 'checkout pods run %s (memory back to the template'"'"'s 512Mi, CPU kept at 300m)\n' "$(pod_values checkout)"
kubectl get rsr checkout -n shop \
  -o jsonpath='last rollback: {.status.lastRollback.reason} of {.status.lastRollback.resources} at {.status.lastRollback.time}{"\n"}'

step "Kubernetes Events of checkout's rsr"
kubectl get events -n shop --field-selector involvedObject.kind=RightsizingRecommendation,involvedObject.name=checkout \
  --sort-by=.metadata.creationTimestamp -o custom-columns='TYPE:.type,REASON:.reason,MESSAGE:.message'

step "kerf-agent report: what the recommendations save, and what holds them back"
"$bin/kerf-agent" report

echo
echo "demo done in $((SECONDS - start))s after the build; the agent's log: $log_keep"
