# Shared by scripts/demo.sh and scripts/demo-prometheus.sh, which source it (it is not run
# on its own): the build, the temporary directory and the processes stopped on exit, the
# steps and their waits, the webhook's certificate, and reading the shop's workloads and
# rsrs. The sourcing script sets `log_keep` (where the agent's log is kept) first.
# shellcheck shell=bash disable=SC2034,SC2154 # bin, start and before are read by the sourcing
# script, which sets log_keep

echo "== building kerf-sim and kerf-agent"
cargo build -q -p kerf-sim -p kerf-agent
bin="${CARGO_TARGET_DIR:-target}/debug"
[ -x "$bin/kerf-agent" ] || {
  echo "demo: no $bin/kerf-agent: set CARGO_TARGET_DIR to cargo's target directory" >&2
  exit 1
}
start=$SECONDS

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

# A self-signed certificate for the agent's webhook listener: $work/tls.crt, $work/tls.key.
webhook_cert() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
    -subj "/CN=kerf-agent.kerf-system.svc" -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -keyout "$work/tls.key" -out "$work/tls.crt" 2>/dev/null
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

# The shop of examples/demo/workloads.yaml with the CRDs and the policy file $1; `before`
# holds each workload's requests, and a table shows them.
install_shop() {
  kubectl apply -f config/crds/ >/dev/null
  kubectl create namespace kerf-system >/dev/null
  kubectl apply -f examples/demo/workloads.yaml >/dev/null
  kubectl wait --for=condition=Available deployment --all -n shop --timeout=60s >/dev/null
  kubectl apply -f "$1" >/dev/null
  declare -gA before
  for w in checkout catalog search; do before[$w]=$(template_values "$w"); done
  kubectl get deployments -n shop -o custom-columns='WORKLOAD:.metadata.name,REPLICAS:.spec.replicas,CPU:.spec.template.spec.containers[0].resources.requests.cpu,MEMORY:.spec.template.spec.containers[0].resources.requests.memory,STRATEGY ANNOTATION:.metadata.annotations.kerf\.getkerf\.dev/strategy,MODE ANNOTATION:.metadata.annotations.kerf\.getkerf\.dev/mode'
}
