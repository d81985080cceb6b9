#!/usr/bin/env bash
# shellcheck disable=SC2016 # wait_for's conditions are single-quoted: it evaluates them itself
# The Kerf demo without a hub: the agent computes the recommendations itself from a real
# Prometheus (`--recommendation-source prometheus`) on a simulated cluster (kerf-sim, no
# dev hub). The three workloads of examples/demo/workloads.yaml, the policy of
# examples/demo-prometheus/policy.yaml.
#
#   1. the workloads before;
#   2. two days of their containers' usage, written as OpenMetrics text for the pods that
#      run, backfilled with `promtool tsdb create-blocks-from openmetrics` into a
#      Prometheus started on that data;
#   3. the agent, with no hub URL: `kubectl get rsr -A -o wide` with SOURCE prometheus and
#      the numbers it computed (CPU: the 90th percentile + 15 %, memory: the peak + 15 %);
#   4. checkout resized in place and its health watch, catalog rolled out, search in audit;
#   5. the events, kept in the cluster as Kubernetes Events: no hub is involved.
#
# Needs kubectl, openssl, prometheus and promtool on PATH. Stops everything it started on
# exit; the agent's log is kept in $KERF_DEMO_LOG (default: kerf-demo-prometheus-agent.log
# in the temporary directory). About 30 seconds after the build.
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in kubectl openssl prometheus promtool; do
  command -v "$tool" >/dev/null || {
    echo "demo: $tool is needed on PATH (prometheus and promtool: \`apt-get install prometheus\`" \
      "or https://prometheus.io/download/)" >&2
    exit 1
  }
done

log_keep="${KERF_DEMO_LOG:-${TMPDIR:-/tmp}/kerf-demo-prometheus-agent.log}"
# shellcheck source=scripts/demo-common.sh
. scripts/demo-common.sh

recommended() {
  kubectl get rsr "$1" -n shop \
    -o jsonpath='{.spec.containers[0].requests.cpu}/{.spec.containers[0].requests.memory}'
}
health_watch() {
  kubectl get rsr "$1" -n shop \
    -o jsonpath='{range .status.conditions[?(@.type=="HealthWatch")]}{.reason}: {.message}{end}'
}

step "starting the simulated cluster (no dev hub)"
webhook_cert
"$bin/kerf-sim" serve --kubeconfig "$work/kubeconfig" >"$work/sim.log" 2>&1 &
pids+=($!)
wait_for 20 'grep -q "control listener http" "$work/sim.log" && [ -s "$work/kubeconfig" ]' "kerf-sim"
export KUBECONFIG="$work/kubeconfig"
echo "cluster $(kubectl config view -o jsonpath='{.clusters[0].cluster.server}')"

step "the shop before: requests of each workload"
install_shop examples/demo-prometheus/policy.yaml
echo "Policy shop (examples/demo-prometheus/policy.yaml): auto-patch, in place,"
echo "recommendation.window 48h, minConfidence 0.7, learning period 24h."

step "two days of usage in Prometheus (promtool tsdb create-blocks-from openmetrics)"
# The usage of container app of each running pod, one sample a minute from 50 hours ago
# until a minute ago: a base level, and a busy level from 12:00 to 16:00 UTC each day
# (4 hours of 24, so the 90th percentile of CPU is the busy level and the memory peak is
# the busy one). The source maps the series to each Deployment by the pod names
# (<name>-<pod-template-hash>-<5 characters>), so these pods' history counts for it even
# after a rollout replaces them.
#   workload  CPU base/busy   memory base/busy   recommendation: busy CPU + 15 %, busy memory + 15 %
usage_of=(
  "checkout 150 260 220 300"
  "catalog  300 520 500 640"
  "search   200 350 900 1200"
)
declare -A expected=([checkout]=299m/345Mi [catalog]=598m/736Mi [search]=403m/1380Mi)
for row in "${usage_of[@]}"; do
  read -r w cpu_base cpu_busy mem_base mem_busy <<<"$row"
  for pod in $(kubectl get pods -n shop -l "app=$w" -o jsonpath='{.items[*].metadata.name}'); do
    echo "$pod $cpu_base $cpu_busy $mem_base $mem_busy"
  done
done >"$work/pods.txt"
now=$(date +%s)
awk -v first=$(((now - 50 * 3600) / 60 * 60)) -v last=$((now - 60)) '
  { pod[NR] = $1; cpu[NR, 0] = $2 / 1000; cpu[NR, 1] = $3 / 1000
    mem[NR, 0] = $4 * 1048576; mem[NR, 1] = $5 * 1048576 }
  function busy(t) { h = int((t % 86400) / 3600); return h >= 12 && h < 16 }
  function labels(i) { return "{namespace=\"shop\",pod=\"" pod[i] "\",container=\"app\"}" }
  END {
    print "# TYPE container_cpu_usage_seconds_total counter"
    for (i = 1; i <= NR; i++) {
      seconds = 0
      for (t = first; t <= last; t += 60) {
        printf "container_cpu_usage_seconds_total%s %.3f %d\n", labels(i), seconds, t
        seconds += 60 * cpu[i, busy(t)]
      }
    }
    print "# TYPE container_memory_working_set_bytes gauge"
    for (i = 1; i <= NR; i++)
      for (t = first; t <= last; t += 60)
        printf "container_memory_working_set_bytes%s %d %d\n", labels(i), mem[i, busy(t)], t
    print "# EOF"
  }' "$work/pods.txt" >"$work/usage.om"
mkdir -p "$work/prom/data"
promtool tsdb create-blocks-from openmetrics "$work/usage.om" "$work/prom/data" >"$work/promtool.log" 2>&1 || {
  cat "$work/promtool.log" >&2; echo "demo: promtool could not backfill the usage" >&2; exit 1; }
echo "$(wc -l <"$work/pods.txt") pods, $(($(grep -c '^container_' "$work/usage.om") / 2)) samples a metric, backfilled"
# A free port: nothing answers on it.
port=$((20000 + RANDOM % 20000))
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((20000 + RANDOM % 20000)); done
printf 'global:\n  scrape_interval: 1m\n' >"$work/prom/prometheus.yml"
prometheus --config.file="$work/prom/prometheus.yml" --storage.tsdb.path="$work/prom/data" \
  --web.listen-address="127.0.0.1:$port" >"$work/prometheus.log" 2>&1 &
pids+=($!)
prom="http://127.0.0.1:$port"
wait_for 30 'grep -q "Server is ready to receive web requests" "$work/prometheus.log"' "prometheus at $prom"
echo "prometheus $prom: $(promtool query instant "$prom" 'count(container_memory_working_set_bytes)' | sed 's/.*=> //; s/ @.*//') memory series"

step "starting the agent: kerf-agent run --recommendation-source prometheus --health-metrics-url $prom (no --hub-url)"
"$bin/kerf-agent" run --cluster-name demo --namespace kerf-system \
  --recommendation-source prometheus --health-metrics-url "$prom" \
  --leader-election false --metrics-addr 127.0.0.1:0 --webhook-addr 127.0.0.1:0 \
  --webhook-cert-file "$work/tls.crt" --webhook-key-file "$work/tls.key" \
  --log-format text >"$work/agent.log" 2>&1 &
pids+=($!)
wait_for 40 '[ "$(phase checkout)" = Applied ] && [ "$(phase catalog)" = Applied ] && [ -n "$(phase search)" ]' \
  "checkout and catalog to be Applied"
echo "all three decided $((SECONDS - start))s after the build"

step "kubectl get rsr -A -o wide"
kubectl get rsr -A -o wide
for w in checkout catalog search; do
  source=$(kubectl get rsr "$w" -n shop -o jsonpath='{.spec.source}')
  [ "$source" = prometheus ] || { echo "demo: rsr $w has source '$source', not prometheus" >&2; exit 1; }
  [ "$(recommended "$w")" = "${expected[$w]}" ] || {
    echo "demo: rsr $w recommends $(recommended "$w"), not ${expected[$w]}" >&2; exit 1; }
done
echo "computed from Prometheus: the busy CPU + 15 % (260m -> 299m), the busy memory + 15 %"
echo "(300Mi -> 345Mi) for checkout, and likewise for catalog and search"

step "checkout's health watch (OOM kills, restarts, throttling from $prom)"
echo "now:   $(health_watch checkout)"
wait_for 30 '[ "$(health_watch checkout | cut -d: -f1)" = Healthy ]' "checkout's health watch to end Healthy"
echo "after: $(health_watch checkout)"

# The rollout replaces catalog's pods; wait until they all run the new template.
wait_for 30 '[ "$(pod_values catalog)" = "$(template_values catalog)" ]' "catalog's rollout"

step "before -> after"
row='%-9s %-19s %-9s %-9s %-12s %-13s %-14s %s\n'
# shellcheck disable=SC2059
printf "$row" WORKLOAD MODE STRATEGY PHASE BEFORE RECOMMENDED "TEMPLATE NOW" "PODS RUN NOW"
for w in checkout catalog search; do
  mode=$(kubectl get rsr "$w" -n shop -o jsonpath='{.status.summary.mode}')
  strategy=$(kubectl get rsr "$w" -n shop -o jsonpath='{.status.strategy.effective}')
  # shellcheck disable=SC2059
  printf "$row" "$w" "$mode" "$strategy" "$(phase "$w")" "${before[$w]}" "$(recommended "$w")" \
    "$(template_values "$w")" "$(pod_values "$w")"
done
[ "$(pod_values checkout)" = "${expected[checkout]}" ] || {
  echo "demo: checkout's pods run $(pod_values checkout), not ${expected[checkout]}" >&2; exit 1; }
if [ "$(template_values search)" != "${before[search]}" ] || [ "$(pod_values search)" != "${before[search]}" ]; then
  echo "demo: search changed in audit" >&2; exit 1
fi
echo "checkout: its 3 pods were resized in place; the template keeps 500m/512Mi"
echo "catalog:  its template was changed (server-side apply) and rolled out"
echo "search:   audit only: the recommendation is reported, nothing changes"

step "no hub: the events are Kubernetes Events on the rsrs (kubectl get events -n shop)"
kubectl get events -n shop --field-selector involvedObject.kind=RightsizingRecommendation \
  --sort-by=.metadata.creationTimestamp \
  -o custom-columns='RSR:.involvedObject.name,TYPE:.type,REASON:.reason,MESSAGE:.message'
kubectl get events -n shop --field-selector involvedObject.kind=RightsizingRecommendation,involvedObject.name=checkout,reason=RecommendationApplied \
  -o name | grep -q . || { echo "demo: no RecommendationApplied event on checkout's rsr" >&2; exit 1; }

# The agent's own metrics: nothing is buffered for a hub, and no hub was ever asked.
metrics=$(grep -o 'metrics and health server listening addr=[0-9.:]*' "$work/agent.log" | head -n1 | cut -d= -f2)
exec 3<>"/dev/tcp/${metrics%:*}/${metrics##*:}"
printf 'GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n' "$metrics" >&3
cat <&3 >"$work/metrics.txt"
exec 3<&-
grep -E '^kerf_agent_(events|hub)' "$work/metrics.txt"
if ! grep -qx 'kerf_agent_events_buffered 0' "$work/metrics.txt" ||
  grep -qE '^kerf_agent_hub_requests_total.* [1-9]' "$work/metrics.txt"; then
  echo "demo: the agent buffered events for a hub or asked one" >&2; exit 1
fi
echo "(kerf_agent_events_buffered 0: the outbox holds nothing; no hub request was made)"

echo
echo "demo done in $((SECONDS - start))s after the build; the agent's log: $log_keep"
