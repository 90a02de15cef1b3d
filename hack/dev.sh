#!/usr/bin/env bash
# make dev: runs the product locally, on a fresh machine too.
#
#   hack/dev.sh [--backends=auto|kubernetes,gcp,kvm] [--debug] [--once]
#
# 1. Builds what is missing into the tool cache (hack/tools.sh; the first run
#    takes ~30 min on 2 cores, later runs none).
#    As root it also builds the real node's squid image (hack/squid-image.sh;
#    make dev builds the KVM guest image).
# 2. Runs hack/dev (Go): a local Crossplane control plane - kube-apiserver,
#    etcd, kube-controller-manager, kube-scheduler, a real node (kubelet,
#    containerd; kwok with fake nodes where that cannot run), Crossplane core, the
#    composition function, the provider, the XRD and Compositions, the
#    backends' ProviderConfigs and test doubles (a private libvirtd booting
#    the real guest image) - then the example claims of examples/composition
#    in namespace team-a, one per backend that can run here. It waits until
#    they are Ready (squid serves), prints `crossplane beta trace` of each
#    and its connection Secret's keys, sends one request through each proxy
#    to an origin in the backend's own network namespace, and runs until
#    Ctrl-C.
#
# Every process is stopped by PID on exit (a watchdog kills them even if
# hack/dev is killed). State and logs: _output/dev/ (logs/ holds one log per
# process); build logs: _output/dev-build/.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BUILD=$ROOT/_output/dev-build
mkdir -p "$BUILD"
TOOLS=(etcd kube-apiserver kubectl kube-controller-manager kube-scheduler kwok kubelet crossplane crossplane-core)
t0=$SECONDS

step() { printf '[dev %4ss] %s\n' "$((SECONDS - t0))" "$*"; }
fail() { printf '[dev] FAILED: %s (log: %s)\n' "$1" "$2" >&2; tail -n 20 "$2" >&2 || true; exit 1; }

for t in "${TOOLS[@]}"; do
  if hack/tools.sh cached "$t" >/dev/null 2>&1; then continue; fi
  s=$SECONDS
  step "building $t into the tool cache (first run only; log: $BUILD/tools-$t.log)"
  hack/tools.sh build "$t" >"$BUILD/tools-$t.log" 2>&1 || fail "building $t" "$BUILD/tools-$t.log"
  step "built $t in $((SECONDS - s))s"
done

# The real node runs only as root; elsewhere kwok's fake nodes stand in.
if [ "$(id -u)" = 0 ] && ! hack/squid-image.sh path >/dev/null 2>&1; then
  s=$SECONDS
  step "building the real node's squid image (first run only; log: $BUILD/squid-image.log)"
  hack/squid-image.sh build >"$BUILD/squid-image.log" 2>&1 || fail "building the squid image" "$BUILD/squid-image.log"
  step "built the squid image in $((SECONDS - s))s"
fi

s=$SECONDS
step "building hack/dev"
go build -o "$BUILD/dev" ./hack/dev >"$BUILD/dev.log" 2>&1 || fail "building hack/dev" "$BUILD/dev.log"
step "built hack/dev in $((SECONDS - s))s"

# exec: Ctrl-C goes straight to hack/dev, which stops everything in order.
exec "$BUILD/dev" "$@"
