#!/usr/bin/env bash
# Runs the product locally on its embedded default: a local control plane
# (kube-apiserver + etcd built from the module proxy) with the provider's
# CRDs, the provider process, and example resources, until Ctrl-C.
#
# Every process started here is stopped by PID on exit. State and logs live
# in _output/dev/.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
DEV=$ROOT/_output/dev
LOGS=$DEV/logs
mkdir -p "$LOGS"
export KUBECONFIG=$DEV/kubeconfig
pids=()
t0=$SECONDS

step() { printf '\n[dev %4ss] %s\n' "$((SECONDS - t0))" "$*"; }
fail() { printf '[dev] FAILED: %s (log: %s)\n' "$1" "$2" >&2; exit 1; }
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  echo "[dev] stopped"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step "building the control plane binaries (first run only: ~15 min)"
hack/tools.sh build etcd kube-apiserver kubectl >"$LOGS/tools.log" 2>&1 || fail "tools" "$LOGS/tools.log"
KUBECTL=$(hack/tools.sh path kubectl)

step "building the provider"
go build -o "$DEV/bin/provider" ./cmd/provider >"$LOGS/build.log" 2>&1 || fail "build" "$LOGS/build.log"
go build -o "$DEV/bin/controlplane" ./hack/controlplane >>"$LOGS/build.log" 2>&1 || fail "build" "$LOGS/build.log"

step "starting kube-apiserver and etcd with the provider's CRDs"
"$DEV/bin/controlplane" -write-kubeconfig "$KUBECONFIG" >"$LOGS/controlplane.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 600); do
  grep -q READY "$LOGS/controlplane.log" 2>/dev/null && break
  kill -0 "${pids[-1]}" 2>/dev/null || fail "control plane" "$LOGS/controlplane.log"
  sleep 0.1
done
grep -q READY "$LOGS/controlplane.log" || fail "control plane did not become ready" "$LOGS/controlplane.log"

step "starting the provider"
"$DEV/bin/provider" --debug --poll=15s --metrics-bind-address=127.0.0.1:0 --health-probe-bind-address=127.0.0.1:0 >"$LOGS/provider.log" 2>&1 &
pids+=($!)

step "applying the example resources (namespace team-a)"
"$KUBECTL" create namespace team-a --dry-run=client -o yaml | "$KUBECTL" apply -f - >/dev/null
# The Kubernetes backend's target is this same control plane.
"$KUBECTL" -n team-a create secret generic local-kubeconfig --from-file=kubeconfig="$KUBECONFIG" \
  --dry-run=client -o yaml | "$KUBECTL" apply -f - >/dev/null
"$KUBECTL" create namespace egress --dry-run=client -o yaml | "$KUBECTL" apply -f - >/dev/null
"$KUBECTL" apply -f hack/dev/ >"$LOGS/apply.log" 2>&1 || fail "applying examples" "$LOGS/apply.log"

step "waiting for the example proxy to be reconciled"
for _ in $(seq 1 60); do
  synced=$("$KUBECTL" -n team-a get kubernetesproxy local -o jsonpath='{.status.conditions[?(@.type=="Synced")].status}' 2>/dev/null || true)
  [ -n "$synced" ] && break
  sleep 1
done
"$KUBECTL" get managed -A -o wide || true

cat <<EOT

[dev] The local control plane is running.
      export KUBECONFIG=$KUBECONFIG
      kubectl get egressproxy -A        # every proxy managed resource
      kubectl describe kubernetesproxy -n team-a local
      Logs: $LOGS
      Ctrl-C stops everything.
EOT
wait "${pids[0]}"
