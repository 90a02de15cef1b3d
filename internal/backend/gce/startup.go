/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gce

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// vmFile is a file the VM must hold. Path, Owner and Mode come from this
// package, never from a user; Content is written base64-encoded, so no
// input can break out of the script.
type vmFile struct {
	Path    string
	Owner   string // user:group
	Mode    string // octal, such as 0640
	Content []byte
}

// startupScriptHead installs squid when it is missing. On images with
// cloud-init it first waits (at most ten minutes, in case cloud-init is
// installed but disabled) for cloud-init to finish, so the two never fight
// over the dpkg lock; cloud-init then did the work and the files below
// already match.
const startupScriptHead = `#!/bin/bash
# Written by provider-egressproxy. Compute Engine runs it at every boot.
# On images without cloud-init (Debian's GCE images) it does what the
# user-data does elsewhere: install squid, write its configuration, and
# restart it. It changes nothing when everything is already in place.
set -euo pipefail
if command -v cloud-init >/dev/null 2>&1; then
  timeout 600 cloud-init status --wait >/dev/null 2>&1 || true
fi
if ! command -v squid >/dev/null 2>&1 || ! command -v nft >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  for attempt in 1 2 3 4 5; do
    if apt-get update -q && apt-get install -y -q --no-install-recommends squid nftables; then
      break
    fi
    [ "$attempt" = 5 ] && exit 1
    sleep 10
  done
fi
changed=0
put() { # path user:group mode base64-content
  local tmp
  tmp="$(mktemp)"
  printf '%s' "$4" | base64 -d >"$tmp"
  if ! cmp -s "$tmp" "$1"; then
    install -D -o "${2%%:*}" -g "${2##*:}" -m "$3" "$tmp" "$1"
    changed=1
  fi
  rm -f "$tmp"
}
`

const startupScriptTail = `if [ "$changed" = 1 ]; then
  systemctl daemon-reload
fi
systemctl enable squid
if [ "$changed" = 1 ] || ! systemctl is-active --quiet squid; then
  systemctl restart squid
fi
`

// Files of the metadata guard.
const (
	metadataGuardPath   = "/etc/egressproxy/metadata-guard.nft"
	metadataGuardDropIn = "/etc/systemd/system/squid.service.d/egressproxy-metadata-guard.conf"
)

// metadataGuard is an nftables ruleset that keeps squid's user (proxy) from
// the metadata server, which hands out the VM's service account tokens to
// any local process that asks. DNS is let through: on GCE the metadata
// server is also the VM's resolver. Root (the guest agent, this script) is
// not affected. Squid's own configuration refuses link-local destinations
// too; this holds even if a configuration ever would not. Loading it
// replaces the table at once, so it can run at every start of squid.
const metadataGuard = `#!/usr/sbin/nft -f
# Written by provider-egressproxy: squid may not reach the metadata server.
table inet egressproxy_metadata_guard
delete table inet egressproxy_metadata_guard
table inet egressproxy_metadata_guard {
	chain output {
		type filter hook output priority filter; policy accept;
		meta skuid "proxy" ip daddr 169.254.169.254 meta l4proto { tcp, udp } th dport 53 accept
		meta skuid "proxy" ip daddr 169.254.169.254 counter reject
		meta skuid "proxy" ip6 daddr fd20:ce::254 meta l4proto { tcp, udp } th dport 53 accept
		meta skuid "proxy" ip6 daddr fd20:ce::254 counter reject
	}
}
`

// metadataGuardUnit loads the guard before squid starts, at every start: a
// squid whose guard cannot be loaded does not start.
const metadataGuardUnit = `# Written by provider-egressproxy.
[Service]
ExecStartPre=/usr/sbin/nft -f ` + metadataGuardPath + `
`

// metadataGuardFiles are the files that put the guard in place.
func metadataGuardFiles() []vmFile {
	return []vmFile{
		{Path: metadataGuardPath, Owner: "root:root", Mode: "0644", Content: []byte(metadataGuard)},
		{Path: metadataGuardDropIn, Owner: "root:root", Mode: "0644", Content: []byte(metadataGuardUnit)},
	}
}

// startupScript returns the startup-script that provisions the proxy on
// images without cloud-init. Compute Engine's guest agent runs it as root at
// every boot, so a VM that lost its files (or a Debian image, which has no
// cloud-init) still ends up with the configuration in the metadata.
func startupScript(files []vmFile) string {
	var b strings.Builder
	b.WriteString(startupScriptHead)
	for _, f := range files {
		fmt.Fprintf(&b, "put %s %s %s '%s'\n", f.Path, f.Owner, f.Mode, base64.StdEncoding.EncodeToString(f.Content))
	}
	b.WriteString(startupScriptTail)
	return b.String()
}
