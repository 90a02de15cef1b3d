# Sourced by the image builds (hack/guest-image.sh, hack/squid-image.sh).
# shellcheck shell=bash

# mirror prints the URI of apt's own source for suite $1, so the build uses
# whatever mirror (or local copy) this machine is configured with.
mirror() {
  local suite=$1 f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v s="$suite" 'BEGIN{RS=""} {
      u=""; ok=0; n=split($0, l, "\n")
      for (i=1; i<=n; i++) {
        if (l[i] ~ /^URIs:/) { split(l[i], w, /[ \t]+/); u=w[2] }
        if (l[i] ~ /^Suites:/) { m=split(l[i], w, /[ \t]+/); for (j=2; j<=m; j++) if (w[j]==s) ok=1 }
      }
      if (ok && u!="") { print u; exit }
    }' "$f"
  done | head -1
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    sed -E 's/\[[^]]*\]//' "$f" | awk -v s="$suite" '$1=="deb" && $3==s {print $2; exit}'
  done | head -1
}
