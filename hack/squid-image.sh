#!/usr/bin/env bash
# Builds the container images a real node (internal/testenv/node) runs, with
# no registry: squid from Debian's own package, which meets the
# KubernetesProxy's default image contract (/bin/sh, mkfifo, cat,
# /usr/sbin/squid, /usr/lib/squid/basic_ncsa_auth, user proxy = 13), and a
# tiny pause image for pod sandboxes. Each is a `docker save`-style archive
# that `ctr images import` loads. Offline apart from the Debian mirror apt
# already uses. Needs root, Go and `hack/deps.sh node`.
#
#   hack/squid-image.sh [build]   build unless cached; print the images' folder
#   hack/squid-image.sh path      print the folder if built, else exit 1
#
# The folder holds squid.tar, pause.tar and refs (lines "squid REF",
# "pause REF"). It is cached under
# ${XDG_CACHE_HOME:-$HOME/.cache}/provider-egressproxy/images, keyed by a
# hash of this script and the mirror. MIRROR overrides the mirror read from
# apt's sources.
set -euo pipefail

SUITE=bookworm
PACKAGES=(squid)

# shellcheck source=hack/lib/apt-mirror.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/apt-mirror.sh"
main=${MIRROR:-$(mirror "$SUITE" | head -1)}

cache=${XDG_CACHE_HOME:-$HOME/.cache}/provider-egressproxy/images
key=$( (cat "${BASH_SOURCE[0]}"; echo "$main") | sha256sum | cut -c1-16)
out=$cache/node-images-$key

case ${1:-build} in
  path) [ -f "$out/refs" ] && echo "$out" && exit 0; exit 1 ;;
  build) ;;
  *) echo "usage: $0 [build|path]" >&2; exit 2 ;;
esac

if [ -f "$out/refs" ]; then echo "$out"; exit 0; fi
if [ "$(id -u)" != 0 ]; then
  echo "hack/squid-image.sh: building the image needs root (mmdebstrap --mode=root)" >&2
  exit 1
fi
if [ -z "$main" ]; then
  echo "hack/squid-image.sh: no apt source for $SUITE found; set MIRROR" >&2
  exit 1
fi

mkdir -p "$cache"
exec 9>"$cache/.lock-node-images"
flock 9
if [ -f "$out/refs" ]; then echo "$out"; exit 0; fi

work=$(mktemp -d "$cache/.build-node-XXXXXX")
trap 'rm -rf --one-file-system "$work"' EXIT
start=$SECONDS

# archive NAME REF LAYER CONFIG_JSON writes $work/NAME.tar, a docker-archive
# of one layer (an uncompressed tar) and the given container config.
archive() {
  local name=$1 ref=$2 layer=$3 conf=$4 d=$work/$1.d
  mkdir -p "$d"
  local diff; diff=$(sha256sum "$layer" | cut -d' ' -f1)
  mv "$layer" "$d/$diff.tar"
  jq -n --arg diff "sha256:$diff" --argjson conf "$conf" \
    '{architecture: "amd64", os: "linux", config: $conf, rootfs: {type: "layers", diff_ids: [$diff]}}' >"$d/config.json"
  local cfg; cfg=$(sha256sum "$d/config.json" | cut -d' ' -f1)
  mv "$d/config.json" "$d/$cfg.json"
  jq -n --arg cfg "$cfg.json" --arg ref "$ref" --arg layer "$diff.tar" \
    '[{Config: $cfg, RepoTags: [$ref], Layers: [$layer]}]' >"$d/manifest.json"
  tar -C "$d" -cf "$work/$name.tar" manifest.json "$cfg.json" "$diff.tar"
  rm -rf "$d"
}

# Respect the host's apt settings that matter for reaching its mirror (a
# snapshot mirror needs Check-Valid-Until off).
aptopts=()
for o in Acquire::Check-Valid-Until Acquire::Check-Date Acquire::http::Proxy; do
  v=$(apt-config dump "$o" | sed -n "s/^$o \"\(.*\)\";$/\1/p" | head -1)
  [ -n "$v" ] && aptopts+=(--aptopt="$o \"$v\"")
done

echo "[squid-image] bootstrapping $SUITE with ${PACKAGES[*]} from $main" >&2
mmdebstrap --quiet --variant=minbase --mode=root --format=tar \
  --include="$(IFS=,; echo "${PACKAGES[*]}")" \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*' \
  "${aptopts[@]}" \
  "$SUITE" "$work/squid-layer.tar" "deb $main $SUITE main" "deb $main $SUITE-updates main" >&2
archive squid "egressproxy.local/squid:$key" "$work/squid-layer.tar" \
  '{"User": "13:13", "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"], "Cmd": ["/usr/sbin/squid", "-N"]}'

# The pause image: a static program that sleeps until it is signalled.
mkdir -p "$work/pause/src" "$work/pause/root"
cat >"$work/pause/src/main.go" <<'GO'
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
	<-c
}
GO
printf 'module pause\n\ngo 1.21\n' >"$work/pause/src/go.mod"
(cd "$work/pause/src" && CGO_ENABLED=0 GOFLAGS= go build -trimpath -ldflags '-s -w' -o "$work/pause/root/pause" .)
tar -C "$work/pause/root" --owner=0 --group=0 -cf "$work/pause-layer.tar" pause
archive pause "egressproxy.local/pause:$key" "$work/pause-layer.tar" \
  '{"User": "65535:65535", "Entrypoint": ["/pause"]}'

mkdir -p "$work/out"
mv "$work/squid.tar" "$work/pause.tar" "$work/out/"
printf 'squid egressproxy.local/squid:%s\npause egressproxy.local/pause:%s\n' "$key" "$key" >"$work/out/refs"
mv "$work/out" "$out"
# Only the current images stay cached.
find "$cache" -maxdepth 1 -name 'node-images-*' ! -path "$out" -exec rm -rf {} +
echo "[squid-image] built in $((SECONDS - start))s: $out" >&2
echo "$out"
