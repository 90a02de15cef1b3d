/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"encoding/base64"
	"fmt"
	"path"
	"strings"

	"github.com/egressproxy/provider-egressproxy/internal/cloudinit"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
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
// most two minutes) for the reporter to see it serve, starts the timer that
// keeps reporting and (re)starts the guest's services: the units of
// cloudinit.GuestFiles and the metadata watcher, which from then on
// applies every change.
const startupScriptTail = `if [ "$changed" = 1 ]; then
  systemctl daemon-reload
fi
systemctl enable squid
if [ "$changed" = 1 ] || ! systemctl is-active --quiet squid; then
  systemctl restart squid
fi
for unit in $units; do
  systemctl enable "$unit" 2>/dev/null || true
  if [ "$changed" = 1 ]; then verb=restart; else verb=start; fi
  systemctl "$verb" "$unit" || echo "cannot $verb $unit" >&2
done
for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24; do
  if "$report"; then break; fi
  sleep 5
done
systemctl enable --now egressproxy-report.timer
if [ "$changed" = 1 ]; then systemctl restart ` + watcherUnitName + `; else systemctl start ` + watcherUnitName + `; fi
`

// Files of the reporter, and the state it reads: the checksum and port of
// the configuration squid should serve, which the startup-script writes at
// boot and the watcher after each live apply. The reporter itself never
// changes with the configuration.
const (
	reporterPath      = "/usr/local/sbin/egressproxy-report"
	reporterUnitPath  = "/etc/systemd/system/egressproxy-report.service"
	reporterTimerPath = "/etc/systemd/system/egressproxy-report.timer"
	guestStateDir     = cloudinit.StateDir
)

// putAttribute is a bash function that writes a guest attribute through the
// metadata server over bash's /dev/tcp (minimal images have no curl):
// put_attribute KEY VALUE, in namespace egressproxy. It fails when the
// metadata server does not answer 200.
const putAttribute = `put_attribute() {
  local reply=""
  exec 4<>"/dev/tcp/${md%:*}/${md##*:}" || return 2
  printf 'PUT /computeMetadata/v1/instance/guest-attributes/` + GuestNamespace + `/%s HTTP/1.1\r\nHost: %s\r\nMetadata-Flavor: Google\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' "$1" "${md%:*}" "${#2}" "$2" >&4
  read -r -t 10 reply <&4 || true
  exec 4<&-
  case $reply in "HTTP/1."?" 200"*) return 0 ;; esac
  echo "the metadata server answered: $reply" >&2
  return 2
}
`

// reporterScript probes squid and writes the verdict to the guest
// attribute (see guest.go), with the traffic counters and the boot ID. Run
// without arguments it probes and exits 0 when squid serves, 1 when not, 2
// when the metadata server did not take the report; with a state and a
// reason it reports those. The probe's request is refused by squid itself
// (a client or destination rule), so it sends no packet beyond loopback.
// The checksum and port come from the state directory, so the script is
// the same for every configuration. Variables starting EGRESSPROXY_ point
// it elsewhere in tests.
const reporterScript = `#!/bin/bash
# Written by provider-egressproxy: reports whether squid serves the
# configuration this VM should serve, as guest attribute ` + GuestAttributePath + `.
set -u
export LC_ALL=C
md=${EGRESSPROXY_METADATA:-metadata.google.internal:80}
etc=${EGRESSPROXY_STATE_DIR:-` + guestStateDir + `}
conf=${EGRESSPROXY_SQUID_CONF:-` + cloudinit.DefaultSquidConfPath + `}
traffic=${EGRESSPROXY_TRAFFIC:-` + cloudinit.TrafficPath + `}
bootid=${EGRESSPROXY_BOOT_ID:-/proc/sys/kernel/random/boot_id}
# A live apply (egressproxy-apply holds this lock) changes squid.conf before
# the checksum: wait for it, or the probe would see a mismatch.
if exec 8>>"$etc/apply.lock" 2>/dev/null; then flock -w 30 8 2>/dev/null || true; fi
sum=$(cat "$etc/checksum" 2>/dev/null) || sum=""
port=$(cat "$etc/port" 2>/dev/null) || port=""
probe() {
  systemctl is-active --quiet squid || { echo "squid is not running"; return 1; }
  set -- $(sha256sum "$conf" 2>/dev/null)
  [ -n "$sum" ] && [ "${1:-}" = "$sum" ] || { echo "$conf is not the rendered configuration"; return 1; }
  case $port in ""|*[!0-9]*) echo "no proxy port in $etc/port"; return 1 ;; esac
  exec 3<>"/dev/tcp/127.0.0.1/$port" 2>/dev/null || { echo "squid does not accept connections on port $port"; return 1; }
  printf 'GET ` + squidProbeURL + ` HTTP/1.0\r\n\r\n' >&3
  local status=""
  read -r -t 5 status <&3 || true
  exec 3<&-
  case $status in HTTP/1.*) return 0 ;; esac
  echo "squid does not answer HTTP on port $port"
  return 1
}
` + putAttribute + `state=${1:-} why=${2:-}
if [ -z "$state" ]; then
  if why=$(probe); then state=` + GuestServing + `; else state=` + GuestFailed + `; fi
fi
if [ "$state" = ` + GuestFailed + ` ] && [ -n "${EGRESSPROXY_REPORT_NOTE:-}" ]; then
  why="$why; $EGRESSPROXY_REPORT_NOTE"
fi
# The counters and boot ID go first: Observe reads them with the state.
if counts=$(head -n 1 "$traffic" 2>/dev/null) && [ -n "$counts" ]; then
  put_attribute traffic "${counts:0:1000}" || true
fi
if id=$(cat "$bootid" 2>/dev/null) && [ -n "$id" ]; then
  put_attribute boot-id "${id:0:64}" || true
fi
value="$state ${sum:-none} $(date +%s)${why:+ $why}"
put_attribute state "${value:0:` + maxReportString + `}" || exit 2
[ "$state" = ` + GuestServing + ` ]
`

// squidProbeURL is what the reporter asks squid for: a URL no allowlist
// admits, so squid answers it itself (and the traffic counter skips it).
const squidProbeURL = squid.ProbeURL

// maxReport bounds what the guest writes; Observe shows the reason.
const (
	maxReport       = 300
	maxReportString = "300"
)

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

// reporterFiles are the reporter, its units, and the checksum and port of
// the configuration (whose checksum is sum, served on port) it reports on.
func reporterFiles(sum string, port int32) []vmFile {
	return []vmFile{
		{Path: reporterPath, Owner: "root:root", Mode: "0755", Content: []byte(reporterScript)},
		{Path: reporterUnitPath, Owner: "root:root", Mode: "0644", Content: []byte(reporterUnit)},
		{Path: reporterTimerPath, Owner: "root:root", Mode: "0644", Content: fmt.Appendf(nil, reporterTimer, int(GuestReportInterval.Seconds()))},
		{Path: guestStateDir + "/checksum", Owner: "root:root", Mode: "0644", Content: []byte(sum + "\n")},
		{Path: guestStateDir + "/port", Owner: "root:root", Mode: "0644", Content: fmt.Appendf(nil, "%d\n", port)},
	}
}

// Files of the metadata watcher.
const (
	watcherPath     = "/usr/local/sbin/egressproxy-watch"
	watcherUnitName = "egressproxy-watch.service"
	watcherUnitPath = "/etc/systemd/system/" + watcherUnitName
)

// watcherScript applies configuration changes live. It waits on the
// metadata server (wait_for_change on the instance attributes, with the
// last ETag it handled) for the metadata to change; then it reads the
// squid configuration, htpasswd file, port and checksum, and, when they
// are not what squid has, hands them to egressproxy-apply (which checks
// the configuration and reconfigures the running squid). It writes the
// outcome to guest attribute egressproxy/apply (a GuestReport: applied, or
// failed with the reason; the previous configuration stays) and runs the
// reporter, so Observe sees the new checksum at once. It never reports
// "starting": squid serves throughout. systemd restarts it if it exits.
const watcherScript = `#!/bin/bash
# Written by provider-egressproxy: applies changes of this VM's metadata
# (the squid configuration, the htpasswd file) to the running squid.
set -u
export LC_ALL=C
md=${EGRESSPROXY_METADATA:-metadata.google.internal:80}
etc=${EGRESSPROXY_STATE_DIR:-` + guestStateDir + `}
conf=${EGRESSPROXY_SQUID_CONF:-` + cloudinit.DefaultSquidConfPath + `}
htpasswd=${EGRESSPROXY_HTPASSWD:-` + cloudinit.DefaultHtpasswdPath + `}
apply=${EGRESSPROXY_APPLY:-` + cloudinit.ApplyScriptPath + `}
report=${EGRESSPROXY_REPORTER:-` + reporterPath + `}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
` + putAttribute + `# fetch PATH FILE: GET a metadata server path into FILE and its ETag into
# got_etag; fails unless the answer is 200.
fetch() {
  local status="" line
  got_etag=""
  exec 5<>"/dev/tcp/${md%:*}/${md##*:}" || return 1
  printf 'GET /computeMetadata/v1/%s HTTP/1.0\r\nHost: %s\r\nMetadata-Flavor: Google\r\n\r\n' "$1" "${md%:*}" >&5
  if ! IFS= read -r -t 330 status <&5; then exec 5<&-; return 1; fi
  while IFS= read -r -t 30 line <&5; do
    line=${line%$'\r'}
    [ -z "$line" ] && break
    case ${line,,} in etag:*) got_etag=${line#*:}; got_etag=${got_etag# } ;; esac
  done
  timeout 60 cat <&5 >"$2"
  exec 5<&-
  case $status in "HTTP/1."?" 200"*) return 0 ;; esac
  return 1
}
applied() { # state applied-config [reason]
  local value="$1 $2 $(date +%s)${3:+ $3}"
  put_attribute apply "${value:0:` + maxReportString + `}" || true
}
etag=""
while :; do
  q="instance/attributes/?recursive=true"
  if [ -n "$etag" ]; then q="$q&wait_for_change=true&timeout_sec=300&last_etag=$etag"; fi
  if ! fetch "$q" "$work/all"; then sleep 5; continue; fi
  if [ -z "$got_etag" ] || [ "$got_etag" = "$etag" ]; then continue; fi
  new=$got_etag
  a=instance/attributes
  if ! fetch $a/` + MetadataSquidConf + ` "$work/conf.b64" || ! fetch $a/` + MetadataHtpasswd + ` "$work/htpasswd" ||
    ! fetch $a/` + MetadataPort + ` "$work/port" || ! base64 -d "$work/conf.b64" >"$work/conf" 2>/dev/null; then
    sleep 5 # a key is missing or the server did not answer: look again
    continue
  fi
  # The keys were read one by one: when the metadata changed meanwhile they
  # may not belong together, and the next wait answers at once.
  if ! fetch "instance/attributes/?recursive=true" "$work/all" || [ "$got_etag" != "$new" ]; then continue; fi
  sum=$(sha256sum <"$work/conf") port=$(cat "$work/port")
  sum=${sum%% *}
  case $port in ""|*[!0-9]*) sleep 5; continue ;; esac
  # What is applied: the configuration's checksum and the htpasswd file's
  # digest (AppliedConfig).
  ht=$(sha256sum <"$work/htpasswd")
  id="$sum/${ht:0:16}"
  # squid may have it already (the startup-script wrote it at boot).
  result=` + GuestApplied + ` why=""
  if cmp -s "$work/conf" "$conf" && cmp -s "$work/htpasswd" "$htpasswd"; then
    :
  elif out=$({ printf 'conf %s\n' "$(tr -d '\n' <"$work/conf.b64")"
    printf 'htpasswd %s\n' "$(base64 -w 0 "$work/htpasswd")"
    printf 'port %s\n' "$port"; } | "$apply" 2>&1); then
    printf '%s\n' "$sum" >"$etc/checksum"
    printf '%s\n' "$port" >"$etc/port"
  else
    result=` + GuestFailed + ` why=$(printf '%s' "$out" | tr -s '\n' ' ')
  fi
  # What squid serves first, then how the apply went.
  "$report" >/dev/null 2>&1 || true
  applied "$result" "$id" "$why"
  etag=$new
done
`

// watcherUnit keeps the watcher running. It has no [Install]: the
// startup-script starts it at every boot, once squid runs.
const watcherUnit = `# Written by provider-egressproxy.
[Unit]
Description=Apply changes of the instance metadata to squid
After=squid.service

[Service]
ExecStart=` + watcherPath + `
Restart=always
RestartSec=5
`

// watcherFiles are the watcher and its unit.
func watcherFiles() []vmFile {
	return []vmFile{
		{Path: watcherPath, Owner: "root:root", Mode: "0755", Content: []byte(watcherScript)},
		{Path: watcherUnitPath, Owner: "root:root", Mode: "0644", Content: []byte(watcherUnit)},
	}
}

// guestFiles are the files every VM guest gets (egressproxy-apply, the
// traffic counter), as the startup-script writes them.
func guestFiles() []vmFile {
	var out []vmFile
	for _, f := range cloudinit.GuestFiles() {
		out = append(out, vmFile{Path: f.Path, Owner: f.Owner, Mode: f.Permissions, Content: []byte(f.Content)})
	}
	return out
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
	var units []string
	for _, f := range files {
		writePut(&b, f)
		if dir, name := path.Split(f.Path); dir == "/etc/systemd/system/" && strings.HasSuffix(name, ".service") && name != watcherUnitName {
			units = append(units, name)
		}
	}
	fmt.Fprintf(&b, "units='%s'\n", strings.Join(units, " "))
	b.WriteString(startupScriptTail)
	return b.String()
}

func writePut(b *strings.Builder, f vmFile) {
	fmt.Fprintf(b, "put %s %s %s '%s'\n", f.Path, f.Owner, f.Mode, base64.StdEncoding.EncodeToString(f.Content))
}
