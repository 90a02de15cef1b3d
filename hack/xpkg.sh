#!/usr/bin/env bash
# Builds the Crossplane packages into _output/xpkg/ without Docker:
#
#   provider-egressproxy-$VERSION.xpkg       Provider, embedding the linux/amd64 provider image
#   provider-egressproxy-$VERSION-linux_arm64.xpkg
#                                            the same for linux/arm64 (each further
#                                            architecture in ARCHES likewise)
#   function-egressproxy-$VERSION.xpkg       Function, embedding the function image
#   function-egressproxy-$VERSION-linux_arm64.xpkg
#   configuration-egressproxy-$VERSION.xpkg  Configuration: the XRD and Compositions
#   configuration-egressproxy-namespaced-$VERSION.xpkg
#                                            Configuration: the namespaced XRD
#                                            (Crossplane v2) and its Compositions
#
#   hack/xpkg.sh [provider] [function] [configuration] [configuration-namespaced]
#                                            (default: all four)
#   hack/xpkg.sh binaries                    only the binaries the packages embed
#                                            and the host tools (make prepare: the
#                                            tests' package builds then find them in
#                                            Go's build cache)
#   REGISTRY=127.0.0.1:5000/egressproxy VERSION=v0.1.0 hack/xpkg.sh   (make xpkg REGISTRY=... VERSION=...)
#
# With REGISTRY set, the Configuration's dependsOn names the Provider and the
# Function in REGISTRY with the constraint >=VERSION, and its Compositions'
# functionRef the name Crossplane gives that Function (in a copy of its
# package root; the source keeps the release registry): the three are
# released together, so a Configuration upgrade makes Crossplane (with
# --enable-dependency-version-upgrades) roll the Provider and the Function
# to at least its own version. The images are tagged there, and each package is pushed
# to REGISTRY/<name>:VERSION by hack/xpkgpush. VERSION must then be a semver
# tag (vX.Y.Z[-pre]): Crossplane's dependency resolver picks versions from the
# repository's tags with the dependsOn constraints.
#
# Each binary is built static (CGO_ENABLED=0) for each architecture in
# ARCHES and put on an empty base image by hack/mkimage; `crossplane xpkg
# build --embed-runtime-image-tarball` then adds the package layer, one
# package per architecture. hack/xpkgpush pushes the Provider's and the
# Function's as one image index, so nodes of every architecture pull their
# own image (Crossplane reads the package from any of them).
#
# Environment:
#   VERSION        package version in file names and image tags (default v0.0.0-dev)
#   ARCHES         linux architectures of the provider and function images
#                  (default "amd64 arm64", what a release pushes; the tests'
#                  builds set the host's only: an arm64 cross-compile of the
#                  provider costs ~5 min of CPU on a cold Go build cache and
#                  their clusters run on this host)
#   XPKG_TRIMPATH  1 (default): build with -trimpath, as a release does; 0
#                  without, so that the tests' builds share Go's build cache
#                  with go test's own compile of the same packages (go test
#                  cannot trim: testenv.RepoRoot reads its source path)
#   REGISTRY       registry/org to build for and push to (default: build only)
#   PUSH_VIA       HOST:PORT to push to instead of REGISTRY's host (which TLS still
#                  verifies): push by the name nodes pull by, from elsewhere
#   REGISTRY_CA    PEM CA file the push trusts besides the system roots, for a
#                  registry with a private CA (the tests' loopback registry)
#   XPKG_REGISTRY  registry/org of the images (default $REGISTRY, else xpkg.egressproxy.io/egressproxy)
#   OUTPUT_DIR     output folder (default _output)
#   XPKG_OVERLAY   folder with provider/, function/ and configuration/ subfolders
#                  whose files are laid over a copy of the package root before
#                  the build (the tests' upgrade builds v0.2.0 with an extra
#                  printer column this way, without changing the tree's API)
#   CROSSPLANE     Crossplane CLI (default: hack/tools.sh path crossplane, which builds it once)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

VERSION=${VERSION:-v0.0.0-dev}
REGISTRY=${REGISTRY:-}
REGISTRY=${REGISTRY%/}
XPKG_REGISTRY=${XPKG_REGISTRY:-${REGISTRY:-xpkg.egressproxy.io/egressproxy}}
OUT=${OUTPUT_DIR:-$ROOT/_output}
read -r -a ARCHES <<<"${ARCHES:-amd64 arm64}"
TRIM=-trimpath
[ "${XPKG_TRIMPATH:-1}" != 0 ] || TRIM=
IMAGES=$OUT/images
XPKG=$OUT/xpkg

log() { printf '[xpkg] %s\n' "$*" >&2; }
die() { printf '[xpkg] ERROR: %s\n' "$*" >&2; exit 1; }

crossplane_cli() {
  if [ -n "${CROSSPLANE:-}" ]; then echo "$CROSSPLANE"; return; fi
  "$ROOT/hack/tools.sh" path crossplane
}

# go_binary PKG OUT [ARCH] builds a static linux binary (default amd64).
go_binary() {
  log "building $1 for linux/${3:-amd64}"
  mkdir -p "$(dirname "$2")"
  CGO_ENABLED=0 GOOS=linux GOARCH=${3:-amd64} go build $TRIM -ldflags "-s -w" -o "$2" "$1"
}

# arch_suffix ARCH prints what a package file name of ARCH ends in: nothing
# for amd64, whose files keep the plain names, else -linux_ARCH.
arch_suffix() {
  [ "$1" = amd64 ] || printf -- '-linux_%s' "$1"
}

# image NAME ARCH BINARY PATH [mkimage flags...] writes $IMAGES/NAME-linux_ARCH.tar.
image() {
  local name=$1 arch=$2 binary=$3 path=$4; shift 4
  log "building image $XPKG_REGISTRY/$name:$VERSION for linux/$arch"
  "$MKIMAGE" -binary "$binary" -arch "$arch" -path "$path" -ref "$XPKG_REGISTRY/$name:$VERSION" \
    -o "$IMAGES/$name-linux_$arch.tar" "$@"
}

# package NAME ROOT EXAMPLES [xpkg build flags...] writes $XPKG/NAME-$VERSION$SUFFIX.xpkg.
package() {
  local name=$1 root=$2 examples=$3; shift 3
  [ -f "$root/crossplane.yaml" ] || die "$root/crossplane.yaml is missing: a package root needs exactly one package meta file"
  log "building package $name${SUFFIX:-}"
  "$CLI" xpkg build --package-root="$root" --examples-root="$examples" \
    --package-file="$XPKG/$name-$VERSION${SUFFIX:-}.xpkg" "$@"
}

# runtime_packages NAME CMD PATH [mkimage flags...] builds the package NAME,
# embedding the image of ./cmd/CMD at PATH, once per architecture.
runtime_packages() {
  local name=$1 cmd=$2 path=$3 arch root examples=$ROOT/examples/$2; shift 3
  [ -d "$examples" ] || examples=$EMPTY
  root=$(package_root "$cmd")
  for arch in "${ARCHES[@]}"; do
    go_binary "./cmd/$cmd" "$OUT/bin/linux_$arch/$cmd" "$arch"
    image "$name" "$arch" "$OUT/bin/linux_$arch/$cmd" "$path" "$@"
    SUFFIX=$(arch_suffix "$arch") package "$name" "$root" "$examples" \
      --embed-runtime-image-tarball="$IMAGES/$name-linux_$arch.tar"
  done
}

# package_root PART prints the package root of PART: package/PART, or a copy
# of it with $XPKG_OVERLAY/PART laid over it.
package_root() {
  if [ -z "${XPKG_OVERLAY:-}" ] || [ ! -d "$XPKG_OVERLAY/$1" ]; then
    echo "package/$1"
    return
  fi
  local root=$ROOTS/$1-root
  mkdir -p "$root"
  cp -R "package/$1/." "$root/"
  cp -R "$XPKG_OVERLAY/$1/." "$root/"
  log "package/$1 with the overlay $XPKG_OVERLAY/$1"
  echo "$root"
}

build_provider() {
  ls cmd/provider/*.go >/dev/null 2>&1 ||
    die "cmd/provider does not exist yet: cannot build the provider package (build the others with: hack/xpkg.sh function configuration)"
  # No CA bundle: the binaries embed their TLS roots (cmd/*/roots.go).
  runtime_packages provider-egressproxy provider /provider
}

build_function() { runtime_packages function-egressproxy function /function -expose 9443/tcp; }

# to_dns_label mirrors crossplane-runtime's xpkg.ToDNSLabel: the name
# Crossplane gives a package it installs as a dependency is ToDNSLabel of the
# repository path (without the registry host).
to_dns_label() {
  printf '%s' "$1" | cut -c1-63 | sed -E 's#[./:-]#-#g; s#[^a-z0-9-]##g; s#^-+##; s#-+$##'
}

# repository_path drops the registry host (a first element with a dot or a
# colon, or localhost) from a registry/org prefix.
repository_path() {
  local first=${1%%/*}
  case "$first" in
    *.*|*:*|localhost) [ "$first" = "$1" ] && echo "" || echo "${1#*/}" ;;
    *) echo "$1" ;;
  esac
}

# configuration_package PART EXAMPLES builds the Configuration in package/PART.
configuration_package() {
  local part=$1 examples=$2 root
  root=$(package_root "$part")
  if [ -n "$REGISTRY" ]; then
    # dependsOn must name the registry the packages are pushed to, and at
    # least this version of them.
    if [ "$root" = "package/$part" ]; then
      root=$ROOTS/$part-root
      mkdir -p "$root"
      cp -R "package/$part/." "$root/"
    fi
    sed -E -i "s#^([[:space:]]*package:[[:space:]]*).*/((provider|function)-egressproxy)[[:space:]]*\$#\\1$REGISTRY/\\2#" "$root/crossplane.yaml"
    sed -E -i "/^[[:space:]]*dependsOn:/,\$ s#^([[:space:]]*version:[[:space:]]*).*\$#\\1\">=$VERSION\"#" "$root/crossplane.yaml"
    grep -q "package: $REGISTRY/provider-egressproxy\$" "$root/crossplane.yaml" &&
      grep -q "package: $REGISTRY/function-egressproxy\$" "$root/crossplane.yaml" ||
      die "cannot point dependsOn at $REGISTRY in package/$part/crossplane.yaml"
    # The Compositions must call the Function by the name Crossplane gives
    # it when it installs it as a dependency from REGISTRY; any other name
    # leaves every claim uncomposed.
    local repo fn
    repo=$(repository_path "$REGISTRY")
    fn=$(to_dns_label "${repo:+$repo/}function-egressproxy")
    sed -E -i "/^[[:space:]]*functionRef:[[:space:]]*\$/{n;s#^([[:space:]]*name:[[:space:]]*).*\$#\\1$fn#}" "$root"/composition-*.yaml
    if grep -h -A1 'functionRef:' "$root"/composition-*.yaml | grep -E '^[[:space:]]*name:' | grep -qv "name: $fn\$"; then
      die "Crossplane names the Function it installs from $REGISTRY/function-egressproxy \"$fn\", but a functionRef.name in package/$part/composition-*.yaml still differs after rewriting it: those Compositions would not compose"
    fi
  fi
  package "$(pkg_name "$part")" "$root" "$ROOT/$examples"
}

build_configuration() { configuration_package configuration examples/composition; }

# The namespaced XR API: a second Configuration, so that a platform team
# installs the claim API, the namespaced one, or both.
build_configuration-namespaced() { configuration_package configuration-namespaced examples/namespaced; }

# pkg_name PART prints the package name of PART.
pkg_name() {
  case "$1" in
    configuration-namespaced) echo configuration-egressproxy-namespaced ;;
    *) echo "$1-egressproxy" ;;
  esac
}

# push_args NAME prints xpkgpush's FILE[,FILE...]=REF for NAME:
# $REGISTRY/NAME:$VERSION, an image index of the Provider's and the
# Function's packages of every architecture.
push_args() {
  local files=$XPKG/$1-$VERSION.xpkg arch
  case "$1" in
    provider-egressproxy|function-egressproxy)
      files=
      for arch in "${ARCHES[@]}"; do files+=${files:+,}$XPKG/$1-$VERSION$(arch_suffix "$arch").xpkg; done ;;
  esac
  printf '%s=%s\n' "$files" "$REGISTRY/$1:$VERSION"
}

parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(provider function configuration configuration-namespaced)
if [ "${parts[*]}" = binaries ]; then
  mkdir -p "$OUT/bin/host"
  for arch in "${ARCHES[@]}"; do
    go_binary ./cmd/provider "$OUT/bin/linux_$arch/provider" "$arch"
    go_binary ./cmd/function "$OUT/bin/linux_$arch/function" "$arch"
  done
  go build -o "$OUT/bin/host/mkimage" ./hack/mkimage
  go build -o "$OUT/bin/host/xpkgpush" ./hack/xpkgpush
  exit 0
fi
for p in "${parts[@]}"; do
  case "$p" in
    provider|function|configuration|configuration-namespaced) ;;
    *) die "unknown part $p: choose from provider, function, configuration, configuration-namespaced" ;;
  esac
done

if [ -n "$REGISTRY" ]; then
  [[ "$VERSION" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
    die "VERSION=$VERSION is not a semver tag (vX.Y.Z): Crossplane resolves dependencies by semver tags"
fi

mkdir -p "$IMAGES" "$XPKG" "$OUT/bin/host"
CLI=$(crossplane_cli) || die "cannot find or build the Crossplane CLI (hack/tools.sh build crossplane)"
# EMPTY stays empty (an examples root); ROOTS holds edited package roots.
EMPTY=$(mktemp -d)
ROOTS=$(mktemp -d)
trap 'rm -rf "$EMPTY" "$ROOTS"' EXIT
MKIMAGE=$OUT/bin/host/mkimage
go build -o "$MKIMAGE" ./hack/mkimage

for p in "${parts[@]}"; do "build_$p"; done
log "packages in $XPKG:"
ls -l "$XPKG" >&2

if [ -n "$REGISTRY" ]; then
  go build -o "$OUT/bin/host/xpkgpush" ./hack/xpkgpush
  args=()
  for p in "${parts[@]}"; do args+=("$(push_args "$(pkg_name "$p")")"); done
  log "pushing to $REGISTRY"
  "$OUT/bin/host/xpkgpush" ${REGISTRY_CA:+-ca-file "$REGISTRY_CA"} ${PUSH_VIA:+-via "$PUSH_VIA"} "${args[@]}"
fi
