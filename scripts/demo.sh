#!/usr/bin/env bash
# shellcheck disable=SC2016 # wait_for's conditions are single-quoted: it evaluates them itself
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
# (default: kerf-demo-agent.log in the temporary directory). About 20 seconds after the build.
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in kubectl openssl; do
  command -v "$tool" >/dev/null || { echo "demo: $tool is needed on PATH" >&2; exit 1; }
done

log_keep="${KERF_DEMO_LOG:-${TMPDIR:-/tmp}/kerf-demo-agent.log}"
# shellcheck source=scripts/demo-common.sh
. scripts/demo-common.sh

step "starting the simulated cluster and the dev hub"
webhook_cert
"$bin/kerf-sim" serve --kubeconfig "$work/kubeconfig" --hub-file examples/demo/hub.yaml \
  >"$work/sim.log" 2>&1 &
pids+=($!)
wait_for 20 'grep -q "dev hub http" "$work/sim.log" && [ -s "$work/kubeconfig" ]' "kerf-sim"
hub=$(grep -o 'dev hub http://[0-9.:]*' "$work/sim.log" | head -n1 | cut -d' ' -f3)
control=$(grep -o 'control listener http://[0-9.:]*' "$work/sim.log" | head -n1 | cut -d' ' -f3)
export KUBECONFIG="$work/kubeconfig"
echo "cluster $(kubectl config view -o jsonpath='{.clusters[0].cluster.server}'), hub $hub"

step "the shop before: requests of each workload, and what the hub recommends"
install_shop examples/demo/policy.yaml
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
row='%-9s %-19s %-9s %-9s %-12s %-13s %-14s %s\n'
# shellcheck disable=SC2059
printf "$row" WORKLOAD MODE STRATEGY PHASE BEFORE RECOMMENDED "TEMPLATE NOW" "PODS RUN NOW"
for w in checkout catalog search; do
  # Tab-separated: a mode from an annotation reads `audit (annotation)`.
  rsr=$(kubectl get rsr "$w" -n shop -o jsonpath='{.status.summary.mode}{"\t"}{.status.strategy.effective}{"\t"}{.spec.containers[0].requests.cpu}/{.spec.containers[0].requests.memory}')
  IFS=$'\t' read -r mode strategy recommended <<<"$rsr"
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
