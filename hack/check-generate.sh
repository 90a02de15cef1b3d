#!/usr/bin/env bash
# Fails when the generated code or CRDs in the tree differ from what
# `go generate -tags generate .` makes of the sources. It regenerates in a
# copy of the tree, so uncommitted work is neither touched nor mistaken for
# drift.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Entry by entry, not tar of the root: make prepare builds into _output
# beside this, and tar fails ("file changed as we read it") when the root
# gains that folder while it reads it.
shopt -s dotglob
for e in "$root"/*; do
  case "${e##*/}" in .git | _output) continue ;; esac
  cp -a "$e" "$tmp/"
done
(cd "$tmp" && go generate -tags generate . >/dev/null)
status=0
for d in apis package; do
  if ! diff -r -q "$root/$d" "$tmp/$d"; then
    status=1
  fi
done
if [ $status -ne 0 ]; then
  echo "Generated files are stale: run 'make generate' and commit the result." >&2
  exit 1
fi
echo "Generated files are up to date."
