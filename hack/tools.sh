#!/usr/bin/env bash
# Builds the real components the tests and `make dev` need from the Go module
# proxy, once, into a cache keyed by version that a working tree and CI share.
#
#   hack/tools.sh build NAME...   build what is missing (etcd kube-apiserver kubectl
#                                 kube-controller-manager kube-scheduler kube-proxy kubelet kwok
#                                 coredns crossplane crossplane-core provider-kubernetes)
#   hack/tools.sh path NAME       print the binary's path (builds it if missing)
#   hack/tools.sh envtest         print a folder holding etcd + kube-apiserver + kubectl
#   hack/tools.sh cached NAME     print the binary's path only if it is built (exit 1 if not)
#   hack/tools.sh cached-envtest  the envtest folder only if everything in it is built
#
# The proxy here refuses version lists, so every version is exact and every
# program is built in a throw-away wrapper module.
set -euo pipefail

ETCD_VERSION=v3.6.6
K8S_VERSION=v1.35.4
K8S_STAGING_VERSION=v0.35.4
KWOK_VERSION=v0.7.0
CROSSPLANE_CLI_VERSION=v2.2.1   # the last crossplane/v2 with cmd/crank (beta trace, render, validate, xpkg)
CROSSPLANE_CORE_VERSION=v2.4.2
CROSSPLANE_RUNTIME_VERSION=v2.4.0
PROVIDER_KUBERNETES_VERSION=v1.2.0   # the peer make bench runs side by side (docs/bench.md)
COREDNS_VERSION=v1.12.4

CACHE=${EGRESSPROXY_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/provider-egressproxy/tools}
export GOFLAGS=-mod=mod
export CGO_ENABLED=0

log() { printf '[tools] %s\n' "$*" >&2; }

version_of() {
  case "$1" in
    etcd) echo "$ETCD_VERSION" ;;
    kube-apiserver|kubectl|kube-controller-manager|kube-scheduler|kube-proxy|kubelet) echo "$K8S_VERSION" ;;
    kwok) echo "$KWOK_VERSION" ;;
    crossplane) echo "$CROSSPLANE_CLI_VERSION" ;;
    crossplane-core) echo "$CROSSPLANE_CORE_VERSION" ;;
    provider-kubernetes) echo "$PROVIDER_KUBERNETES_VERSION" ;;
    coredns) echo "$COREDNS_VERSION" ;;
    *) log "unknown tool $1"; return 2 ;;
  esac
}

# recipe_rev is bumped when a tool's build recipe changes, so caches built
# by an older recipe are not reused.
recipe_rev() {
  case "$1" in
    crossplane) echo "-r2" ;;
  esac
}

bin_path() { echo "$CACHE/$1-$(version_of "$1")$(recipe_rev "$1")/$1"; }

# wrapper DIR MODULE... creates a wrapper module requiring the given module@versions.
wrapper() {
  local dir=$1; shift
  mkdir -p "$dir"
  ( cd "$dir"
    [ -f go.mod ] || go mod init egressproxy.local/toolbuild >/dev/null 2>&1
    for m in "$@"; do go mod edit -require="$m"; done )
}

build_etcd() {
  local w=$CACHE/src/etcd-$ETCD_VERSION
  wrapper "$w" "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  ( cd "$w" && printf 'package tools\nimport _ "go.etcd.io/etcd/server/v3"\n' >tools.go && go mod tidy >/dev/null 2>&1 || true
    go build -trimpath -o "$1" go.etcd.io/etcd/server/v3 )
}

# k8s.io/kubernetes replaces every staging module with ./staging/...; pin each
# to its published version instead so the module builds outside its repo.
k8s_wrapper() {
  local w=$CACHE/src/kubernetes-$K8S_VERSION
  # .ready-r4: the wrapper also covers cmd/kube-proxy; an older wrapper is re-tidied.
  if [ ! -f "$w/.ready-r4" ]; then
    wrapper "$w" "k8s.io/kubernetes@$K8S_VERSION"
    ( cd "$w"
      local mod
      mod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
      grep -E '=> \./staging' "$mod" | awk -v v="$K8S_STAGING_VERSION" '{print $1}' | while read -r m; do
        go mod edit -replace="$m=$m@$K8S_STAGING_VERSION"
      done
      cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
      go mod tidy >/dev/null
      touch .ready-r4 )
  fi
  echo "$w"
}

build_k8s() { # NAME OUT
  local w; w=$(k8s_wrapper)
  local pkg=k8s.io/kubernetes/cmd/$1
  ( cd "$w" && go build -trimpath -ldflags "-s -w \
      -X k8s.io/component-base/version.gitVersion=$K8S_VERSION \
      -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=35" \
      -o "$2" "$pkg" )
}

build_kwok() {
  local w=$CACHE/src/kwok-$KWOK_VERSION
  wrapper "$w" "sigs.k8s.io/kwok@$KWOK_VERSION"
  ( cd "$w" && printf '//go:build tools\n\npackage tools\nimport _ "sigs.k8s.io/kwok/cmd/kwok"\n' >tools.go && go mod tidy >/dev/null
    go build -trimpath -ldflags "-s -w" -o "$1" sigs.k8s.io/kwok/cmd/kwok )
}

build_crossplane() {
  local w=$CACHE/src/crossplane-cli-$CROSSPLANE_CLI_VERSION
  wrapper "$w" "github.com/crossplane/crossplane/v2@$CROSSPLANE_CLI_VERSION"
  ( cd "$w" && printf '//go:build tools\n\npackage tools\nimport _ "github.com/crossplane/crossplane/v2/cmd/crank"\n' >tools.go && go mod tidy >/dev/null
    # crank reads its version from crossplane's own internal/version; without
    # it `crossplane version --client` prints nothing and `beta validate`
    # defaults to an image with an empty tag.
    go build -trimpath -ldflags "-s -w -X github.com/crossplane/crossplane/v2/internal/version.version=$CROSSPLANE_CLI_VERSION" \
      -o "$1" github.com/crossplane/crossplane/v2/cmd/crank )
}

build_crossplane-core() {
  local w=$CACHE/src/crossplane-core-$CROSSPLANE_CORE_VERSION
  wrapper "$w" "github.com/crossplane/crossplane/v2@$CROSSPLANE_CORE_VERSION"
  ( cd "$w"
    # crossplane-runtime v2.4.1+ is not served here; v2.4.0 builds and runs.
    go mod edit -replace="github.com/crossplane/crossplane-runtime/v2=github.com/crossplane/crossplane-runtime/v2@$CROSSPLANE_RUNTIME_VERSION"
    printf '//go:build tools\n\npackage tools\nimport _ "github.com/crossplane/crossplane/v2/cmd/crossplane"\n' >tools.go && go mod tidy >/dev/null
    go build -trimpath -ldflags "-s -w -X github.com/crossplane/crossplane-runtime/v2/pkg/version.version=$CROSSPLANE_CORE_VERSION" \
      -o "$1" github.com/crossplane/crossplane/v2/cmd/crossplane )
}

# build_provider-kubernetes builds the peer as its own go.mod pins it (a
# wrapper module requiring only it resolves to its own versions), and puts
# its CRDs beside the binary, in crds/.
build_provider-kubernetes() {
  local m=github.com/crossplane-contrib/provider-kubernetes
  local w=$CACHE/src/provider-kubernetes-$PROVIDER_KUBERNETES_VERSION
  wrapper "$w" "$m@$PROVIDER_KUBERNETES_VERSION"
  ( cd "$w" && printf '//go:build tools\n\npackage tools\nimport _ "%s/cmd/provider"\n' "$m" >tools.go && go mod tidy >/dev/null
    go build -trimpath -ldflags "-s -w" -o "$1" "$m/cmd/provider"
    local src; src=$(go list -m -f '{{.Dir}}' "$m")
    rm -rf "$(dirname "$1")/crds" && cp -r "$src/package/crds" "$(dirname "$1")/crds" && chmod -R u+w "$(dirname "$1")/crds" )
}

# build_coredns builds CoreDNS with only the plugins the test cluster's
# Corefile uses: its own main package imports core/plugin, which links every
# plugin and with them every cloud SDK (a much longer build for nothing).
build_coredns() {
  local m=github.com/coredns/coredns
  local w=$CACHE/src/coredns-$COREDNS_VERSION
  wrapper "$w" "$m@$COREDNS_VERSION"
  ( cd "$w"
    cat >main.go <<'GO'
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() { coremain.Run() }
GO
    go mod tidy >/dev/null
    go build -trimpath -ldflags "-s -w" -o "$1" . )
}

ensure() {
  local name=$1 out
  out=$(bin_path "$name")
  [ -x "$out" ] && return 0
  mkdir -p "$(dirname "$out")"
  log "building $name $(version_of "$name") (first run only; cached in $(dirname "$out"))"
  local start=$SECONDS
  case "$name" in
    etcd) build_etcd "$out.tmp" ;;
    kube-apiserver|kubectl|kube-controller-manager|kube-scheduler|kube-proxy|kubelet) build_k8s "$name" "$out.tmp" ;;
    kwok) build_kwok "$out.tmp" ;;
    crossplane) build_crossplane "$out.tmp" ;;
    crossplane-core) build_crossplane-core "$out.tmp" ;;
    provider-kubernetes) build_provider-kubernetes "$out.tmp" ;;
    coredns) build_coredns "$out.tmp" ;;
  esac
  mv "$out.tmp" "$out"
  log "built $name in $((SECONDS - start))s"
}

envtest_dir() {
  ensure etcd; ensure kube-apiserver; ensure kubectl
  local d=$CACHE/envtest-$K8S_VERSION-etcd-$ETCD_VERSION
  mkdir -p "$d"
  for t in etcd kube-apiserver kubectl; do ln -sf "$(bin_path $t)" "$d/$t"; done
  echo "$d"
}

cmd=${1:-}; shift || true
case "$cmd" in
  build) for t in "$@"; do ensure "$t"; done ;;
  path) ensure "$1"; bin_path "$1" ;;
  cached) p=$(bin_path "$1"); [ -x "$p" ] || exit 1; echo "$p" ;;
  cached-envtest)
    for t in etcd kube-apiserver kubectl; do [ -x "$(bin_path $t)" ] || exit 1; done
    envtest_dir ;;
  envtest) envtest_dir ;;
  *) sed -n '2,12p' "$0"; exit 2 ;;
esac
