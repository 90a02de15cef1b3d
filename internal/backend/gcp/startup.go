/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/egressproxy/provider-egressproxy/internal/cloudinit"
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

// startupScriptHead defines put, which writes a file only when its content
// differs and notes that something changed.
const startupScriptHead = `#!/bin/bash
# Written by provider-egressproxy. Compute Engine runs it at every boot.
# On images without cloud-init (Debian's GCE images) it does what the
# user-data does elsewhere: install squid, write its configuration, and
# restart it. It changes nothing when everything is already in place. It
# reports to the metadata server (guest attribute egressproxy/state)
# whether squid serves, and leaves a timer that keeps reporting.
set -euo pipefail
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

// startupScriptBody runs once the reporter is in place. On images with
// cloud-init it first waits (at most ten minutes, in case cloud-init is
// installed but disabled) for cloud-init to finish, so the two never fight
// over the dpkg lock; cloud-init then did the work and the files below
// already match. A cloud-init error is only noted: what counts is whether
// squid serves in the end.
const startupScriptBody = `"$report" starting || true
trap '"$report" failed "the startup-script failed at line $LINENO" || true' ERR
if command -v cloud-init >/dev/null 2>&1; then
  if ! timeout 600 cloud-init status --wait >/dev/null 2>&1; then
    export EGRESSPROXY_REPORT_NOTE="cloud-init reports an error"
  fi
fi
if ! command -v squid >/dev/null 2>&1 || ! command -v nft >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  for attempt in 1 2 3 4 5; do
    if apt-get update -q && apt-get install -y -q --no-install-recommends squid nftables; then
      break
    fi
    if [ "$attempt" = 5 ]; then
      "$report" failed "cannot install squid and nftables with apt-get" || true
      exit 1
    fi
    sleep 10
  done
fi
`

// startupScriptTail restarts squid when something changed, then waits (at
// most two minutes) for the reporter to see it serve, and starts the timer
// that keeps reporting.
const startupScriptTail = `if [ "$changed" = 1 ]; then
  systemctl daemon-reload
fi
systemctl enable squid
if [ "$changed" = 1 ] || ! systemctl is-active --quiet squid; then
  systemctl restart squid
fi
for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24; do
  if "$report"; then break; fi
  sleep 5
done
systemctl enable --now egressproxy-report.timer
`

// Files of the reporter.
const (
	reporterPath      = "/usr/local/sbin/egressproxy-report"
	reporterUnitPath  = "/etc/systemd/system/egressproxy-report.service"
	reporterTimerPath = "/etc/systemd/system/egressproxy-report.timer"
)

// reporterScript probes squid and writes the verdict to the guest
// attribute (see guest.go), over bash's /dev/tcp: minimal images have no
// curl. Run without arguments it probes and exits 0 when squid serves, 1
// when not, 2 when the metadata server did not take the report; with a
// state and a reason it reports those. The probe's request is refused by
// squid itself (a client or destination rule), so it sends no packet
// beyond loopback. Format arguments: checksum, port, squid.conf's path.
const reporterScript = `#!/bin/bash
# Written by provider-egressproxy: reports whether squid serves the
# configuration this VM was made with, as guest attribute ` + GuestAttributePath + `.
set -u
export LC_ALL=C
sum=%s port=%d conf=%s
# The metadata server; tests point it elsewhere.
md=${EGRESSPROXY_METADATA:-metadata.google.internal:80}
probe() {
  systemctl is-active --quiet squid || { echo "squid is not running"; return 1; }
  set -- $(sha256sum "$conf" 2>/dev/null)
  [ "${1:-}" = "$sum" ] || { echo "$conf is not the rendered configuration"; return 1; }
  exec 3<>"/dev/tcp/127.0.0.1/$port" 2>/dev/null || { echo "squid does not accept connections on port $port"; return 1; }
  printf 'GET http://127.0.0.1:1/ HTTP/1.0\r\n\r\n' >&3
  local status=""
  read -r -t 5 status <&3 || true
  exec 3<&-
  case $status in HTTP/1.*) return 0 ;; esac
  echo "squid does not answer HTTP on port $port"
  return 1
}
state=${1:-} why=${2:-}
if [ -z "$state" ]; then
  if why=$(probe); then state=` + GuestServing + `; else state=` + GuestFailed + `; fi
fi
if [ "$state" = ` + GuestFailed + ` ] && [ -n "${EGRESSPROXY_REPORT_NOTE:-}" ]; then
  why="$why; $EGRESSPROXY_REPORT_NOTE"
fi
value="$state $sum $(date +%%s)${why:+ $why}"
value=${value:0:%d}
exec 4<>"/dev/tcp/${md%%:*}/${md##*:}" || exit 2
printf 'PUT /computeMetadata/v1/instance/guest-attributes/` + GuestAttributePath + ` HTTP/1.1\r\nHost: %%s\r\nMetadata-Flavor: Google\r\nContent-Type: text/plain\r\nContent-Length: %%d\r\nConnection: close\r\n\r\n%%s' "${md%%:*}" "${#value}" "$value" >&4
reply=""
read -r -t 10 reply <&4 || true
exec 4<&-
case $reply in "HTTP/1."?" 200"*) ;; *) echo "the metadata server answered: $reply" >&2; exit 2 ;; esac
[ "$state" = ` + GuestServing + ` ]
`

// maxReport bounds what the guest writes; Observe shows the reason.
const maxReport = 300

// reporterUnit runs the reporter once; a probe that finds squid not
// serving (exit 1) is a report, not a failure of the unit.
const reporterUnit = `# Written by provider-egressproxy.
[Unit]
Description=Report to the metadata server whether squid serves
After=squid.service

[Service]
Type=oneshot
ExecStart=` + reporterPath + `
SuccessExitStatus=1
`

const reporterTimer = `# Written by provider-egressproxy.
[Unit]
Description=Report to the metadata server whether squid serves, periodically

[Timer]
OnBootSec=60s
OnUnitActiveSec=%d
AccuracySec=5s

[Install]
WantedBy=timers.target
`

// reporterFiles are the reporter and its units, for the configuration
// whose checksum is sum, served on port.
func reporterFiles(sum string, port int32) []vmFile {
	return []vmFile{
		{Path: reporterPath, Owner: "root:root", Mode: "0755", Content: fmt.Appendf(nil, reporterScript, sum, port, cloudinit.DefaultSquidConfPath, maxReport)},
		{Path: reporterUnitPath, Owner: "root:root", Mode: "0644", Content: []byte(reporterUnit)},
		{Path: reporterTimerPath, Owner: "root:root", Mode: "0644", Content: fmt.Appendf(nil, reporterTimer, int(GuestReportInterval.Seconds()))},
	}
}

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
// images without cloud-init and reports whether squid serves. Compute
// Engine's guest agent runs it as root at every boot, so a VM that lost its
// files (or a Debian image, which has no cloud-init) still ends up with the
// configuration in the metadata. It writes the reporter files first, so
// even a failed install is reported; report is the reporter's path.
func startupScript(report string, reporter, files []vmFile) string {
	var b strings.Builder
	b.WriteString(startupScriptHead)
	for _, f := range reporter {
		writePut(&b, f)
	}
	fmt.Fprintf(&b, "report=%s\n", report)
	b.WriteString(startupScriptBody)
	for _, f := range files {
		writePut(&b, f)
	}
	b.WriteString(startupScriptTail)
	return b.String()
}

func writePut(b *strings.Builder, f vmFile) {
	fmt.Fprintf(b, "put %s %s %s '%s'\n", f.Path, f.Owner, f.Mode, base64.StdEncoding.EncodeToString(f.Content))
}
