#!/usr/bin/env bash
# Builds the cluster DNS image the test cluster runs (internal/testenv/cluster,
# dns.go): the CoreDNS hack/tools.sh builds from source, alone on an empty
# base (hack/mkimage), reading its Corefile from a ConfigMap. A `docker
# save`-style archive that `ctr images import` loads: no registry, no pull.
#
#   hack/coredns-image.sh [build]   build unless cached; print the image's folder
#   hack/coredns-image.sh path      print the folder if built, else exit 1
#
# The folder holds coredns.tar and refs (a line "coredns REF"). It is cached
# under ${XDG_CACHE_HOME:-$HOME/.cache}/provider-egressproxy/images, keyed by
# a hash of this script, hack/mkimage and the CoreDNS binary.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/provider-egressproxy/images

case ${1:-build} in
  path)
    bin=$("$root/hack/tools.sh" cached coredns) || exit 1 ;;
  build)
    bin=$("$root/hack/tools.sh" path coredns) ;;
  *) echo "usage: $0 [build|path]" >&2; exit 2 ;;
esac

key=$(cat "${BASH_SOURCE[0]}" "$root"/hack/mkimage/*.go "$bin" | sha256sum | cut -c1-16)
out=$cache/coredns-image-$key
if [ -f "$out/refs" ]; then echo "$out"; exit 0; fi
[ "${1:-build}" = path ] && exit 1

mkdir -p "$cache"
exec 9>"$cache/.lock-coredns-image"
flock 9
if [ -f "$out/refs" ]; then echo "$out"; exit 0; fi

work=$(mktemp -d "$cache/.build-coredns-XXXXXX")
trap 'rm -rf "$work"' EXIT
version=$("$bin" -version | sed -n 's/^CoreDNS-\(.*\)$/v\1/p')
ref=egressproxy.local/coredns:${version:?cannot read the CoreDNS version}-$key
# Port 53 as a non-root user: the pod sets
# net.ipv4.ip_unprivileged_port_start=0 (a namespaced sysctl).
(cd "$root" && GOFLAGS= go run ./hack/mkimage -binary "$bin" -path /coredns \
  -args "-conf /etc/coredns/Corefile" -user 65532:65532 -expose "53/udp 53/tcp 8080/tcp 8181/tcp" \
  -ref "$ref" -o "$work/coredns.tar")
printf 'coredns %s\n' "$ref" >"$work/refs"
chmod 755 "$work"
mv "$work" "$out"
trap - EXIT
# Only the current image stays cached.
find "$cache" -maxdepth 1 -name 'coredns-image-*' ! -path "$out" -exec rm -rf {} +
echo "$out"
