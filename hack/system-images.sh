#!/usr/bin/env bash
# Builds the images of the cluster's own components, which the test cluster
# runs as pods from its registry as a platform would, with no Docker and no
# download: Crossplane core (Crossplane's Helm chart runs it as core and as
# the RBAC manager) from the crossplane-core binary hack/tools.sh builds.
#
#   hack/system-images.sh [build]   build unless cached; print the images' folder
#   hack/system-images.sh path      print the folder if built, else exit 1
#
# The folder holds crossplane.tar (a docker-archive, as `ctr images import`
# and go-containerregistry's tarball read it) and refs (lines "NAME REF").
# crossplane.tar is what Crossplane's own image holds for the chart
# (cluster/images/crossplane upstream): the binary as ENTRYPOINT at
# /usr/local/bin/crossplane, the CRDs at /crds and the webhook configurations
# at /webhookconfigurations, which `crossplane core init` installs from
# there (its --crds-path and --webhook-configurations-path defaults), user
# 65532. It has no TLS roots: core trusts only the registry CA the chart
# mounts (CA_BUNDLE_PATH), which is all a cluster with no way out needs.
#
# Cached under ${XDG_CACHE_HOME:-$HOME/.cache}/provider-egressproxy/images,
# keyed by a hash of this script, hack/mkimage and the core binary.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/provider-egressproxy/images

log() { printf '[system-images] %s\n' "$*" >&2; }

mode=${1:-build}
case $mode in
  path) core=$("$ROOT/hack/tools.sh" cached crossplane-core) || exit 1 ;;
  build) core=$("$ROOT/hack/tools.sh" path crossplane-core) ;;
  *) echo "usage: $0 [build|path]" >&2; exit 2 ;;
esac

version=$("$core" --version)
arch=$(go env GOARCH) # hack/tools.sh builds for this machine
key=$( (cat "${BASH_SOURCE[0]}" "$ROOT"/hack/mkimage/*.go; sha256sum <"$core"; echo "$version $arch") | sha256sum | cut -c1-16)
out=$cache/system-images-$key

if [ -f "$out/refs" ]; then echo "$out"; exit 0; fi
[ "$mode" = build ] || exit 1

mkdir -p "$cache"
exec 9>"$cache/.lock-system-images"
flock 9
if [ -f "$out/refs" ]; then echo "$out"; exit 0; fi

work=$(mktemp -d "$cache/.build-system-XXXXXX")
trap 'rm -rf --one-file-system "$work"' EXIT
start=$SECONDS

# The CRDs and webhook configurations of the release the binary is, from the
# Go module cache (outside any module, so no go.mod is touched).
xp=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "github.com/crossplane/crossplane/v2@$version" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
[ -d "$xp/cluster/crds" ] && [ -d "$xp/cluster/webhookconfigurations" ] || {
  log "github.com/crossplane/crossplane/v2@$version has no cluster/crds or cluster/webhookconfigurations (go mod download)"
  exit 1
}

(cd "$ROOT" && go build -o "$work/mkimage" ./hack/mkimage)
mkdir -p "$work/out"
ref=egressproxy.local/crossplane:$version-$key
log "building $ref from $core"
"$work/mkimage" -binary "$core" -arch "$arch" -path /usr/local/bin/crossplane -user 65532:65532 \
  -add "$xp/cluster/crds:/crds" -add "$xp/cluster/webhookconfigurations:/webhookconfigurations" \
  -ref "$ref" -o "$work/out/crossplane.tar"
printf 'crossplane %s\n' "$ref" >"$work/out/refs"

mv "$work/out" "$out"
# Only the current images stay cached.
find "$cache" -maxdepth 1 -name 'system-images-*' ! -path "$out" -exec rm -rf {} +
log "built in $((SECONDS - start))s: $out"
echo "$out"
