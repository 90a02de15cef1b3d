/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cloudinit

import (
	"fmt"

	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// ApplyScriptPath is the guest program that applies a new configuration to
// the running squid without a reboot: the KVM backend runs it through the
// guest agent, the GCE guest's metadata watcher runs it on a change.
//
// It reads, on stdin, three lines:
//
//	conf <squid.conf, base64>
//	htpasswd <htpasswd, base64>
//	port <n>
//
// writes the files, checks the configuration (squid -k parse), reconfigures
// squid (squid -k reconfigure), and exits non-zero with the reason on stderr
// when any step fails, leaving the previous files in place. On success it
// prints "applied <sha256 of squid.conf>" (or "unchanged <sha256>") and
// records the checksum and port in StateDir.
const ApplyScriptPath = "/usr/local/sbin/egressproxy-apply"

// Paths of the other guest files.
const (
	// StateDir holds what the guest serves: "checksum" (sha256 of
	// squid.conf) and "port", written by the apply program.
	StateDir = "/etc/egressproxy"
	// TrafficPath is the file the traffic counter keeps one squid.Traffic
	// line in.
	TrafficPath = "/var/lib/egressproxy/traffic"

	trafficAWKPath     = "/usr/local/lib/egressproxy/traffic.awk"
	trafficScriptPath  = "/usr/local/lib/egressproxy/traffic.sh"
	TrafficUnit        = "egressproxy-traffic.service"
	trafficUnitPath    = "/etc/systemd/system/" + TrafficUnit
	squidJournalDropIn = "/etc/systemd/system/squid.service.d/egressproxy-journal.conf"
)

// AccessLogSyslog is the syslog facility and level VMs send squid's access
// log to (squid.Config.AccessLogSyslog): journald keeps it, and the traffic
// counter reads it back by its facility.
const AccessLogSyslog = "local4.info"

// syslogFacilityLocal4 is local4's number, as journald records it.
const syslogFacilityLocal4 = 20

// A File is one file every VM guest gets, whatever writes it (cloud-init's
// write_files on KVM, the startup script on GCE).
type File struct {
	Path        string
	Owner       string
	Permissions string
	Content     string
}

// GuestFiles are the files that give a guest its live-apply program and its
// traffic counter (see squid.TrafficAWK). The traffic unit is to be enabled
// (systemctl enable --now egressproxy-traffic) after they are written, and
// systemd reloaded for the squid drop-in.
func GuestFiles() []File {
	return []File{
		{Path: ApplyScriptPath, Owner: "root:root", Permissions: "0755", Content: applyScript(guestPaths)},
		{Path: trafficAWKPath, Owner: "root:root", Permissions: "0644", Content: squid.TrafficAWK},
		{Path: trafficScriptPath, Owner: "root:root", Permissions: "0755", Content: trafficScript(TrafficPath, trafficAWKPath)},
		{Path: trafficUnitPath, Owner: "root:root", Permissions: "0644", Content: trafficUnit},
		{Path: squidJournalDropIn, Owner: "root:root", Permissions: "0644", Content: squidJournal},
	}
}

// applyPaths are where the apply program finds and keeps things; tests run
// the same program on a squid in a temporary folder.
type applyPaths struct {
	Conf, Htpasswd, State string
	// Start starts squid when it does not run.
	Start string
}

var guestPaths = applyPaths{Conf: DefaultSquidConfPath, Htpasswd: DefaultHtpasswdPath, State: StateDir, Start: "systemctl restart squid"}

// applyScript returns the apply program for p. Its values are constants
// of this package (or a test's folder), never user input.
func applyScript(p applyPaths) string {
	return fmt.Sprintf(applyTemplate, p.Conf, p.Htpasswd, p.State, p.Start)
}

// applyTemplate is the apply program. squid 5 closes and reopens its
// listening sockets on a reconfigure: a connection arriving then would be
// refused. So new connections from other hosts are held back (their SYNs
// dropped; clients retransmit after 1 s) while squid reconfigures, until a
// new listening socket is there; established connections and tunnels are
// not touched. Loopback is exempt, so the program can tell squid listens.
// A changed htpasswd file alone needs no reconfigure: basic_ncsa_auth
// re-reads it when its mtime changes.
const applyTemplate = `#!/bin/bash
# Written by provider-egressproxy: applies a new squid configuration to the
# running squid without a restart. stdin, one line each: "conf <base64>",
# "htpasswd <base64>", "port <n>" (nothing in argv: the htpasswd is secret).
set -euo pipefail
conf=%[1]s
htpasswd=%[2]s
state=%[3]s
start_squid() { %[4]s; }

fail() { echo "$*" >&2; exit 1; }

want() { # key variable
	local k v
	read -r k v || fail "stdin: no $1 line"
	[ "$k" = "$1" ] || fail "stdin: want a $1 line"
	printf -v "$2" %%s "$v"
}
want conf conf64
want htpasswd ht64
want port port
case $port in ''|0*|*[!0-9]*) fail "port: not a port number" ;; esac
[ "${#port}" -le 5 ] && [ "$port" -le 65535 ] || fail "port: not a port number"

mkdir -p "$state" "$(dirname "$htpasswd")"
exec 9>"$state/apply.lock"
flock -w 60 9 || fail "another egressproxy-apply still runs"

new_conf=$(mktemp "$conf.new.XXXXXX")
new_ht=$(mktemp "$htpasswd.new.XXXXXX")
old_conf=$(mktemp "$conf.old.XXXXXX")
old_ht=$(mktemp "$htpasswd.old.XXXXXX")
guarded=false
cleanup() {
	rm -f "$new_conf" "$new_ht" "$old_conf" "$old_ht"
	if $guarded; then nft delete table inet egressproxy_reload 2>/dev/null || true; fi
}
trap cleanup EXIT

base64 -d <<<"$conf64" >"$new_conf" 2>/dev/null || fail "conf: not base64"
base64 -d <<<"$ht64" >"$new_ht" 2>/dev/null || fail "htpasswd: not base64"
[ -s "$new_conf" ] || fail "conf: empty"
[ -s "$new_ht" ] || fail "htpasswd: empty"
chmod 0644 "$new_conf"
chown root:proxy "$new_ht"
chmod 0640 "$new_ht"

if ! out=$(squid -k parse -f "$new_conf" 2>&1); then
	why=$(grep -E 'FATAL|ERROR|unrecognized|Bungled' <<<"$out" | tail -n 3 | sed -e 's/^[0-9\/]* [0-9:]*| //' -e "s|$new_conf|squid.conf|g" | tr '\n' ' ' || true)
	fail "squid -k parse refused the configuration: ${why:-$(tail -n 1 <<<"$out")}"
fi
sum=$(sha256sum "$new_conf")
sum=${sum%%%% *}

record() {
	printf '%%s\n' "$sum" >"$state/checksum.tmp" && mv -f "$state/checksum.tmp" "$state/checksum"
	printf '%%s\n' "$port" >"$state/port.tmp" && mv -f "$state/port.tmp" "$state/port"
	echo "$1 $sum"
}

# listeners prints the inodes of the sockets listening on port $1.
listeners() {
	awk -v p="$(printf '%%04X' "$1")" '$4 == "0A" { split($2, a, ":"); if (a[2] == p) print $10 }' /proc/net/tcp /proc/net/tcp6 2>/dev/null | sort | tr '\n' ' '
}

# serving waits up to 10 s for a socket listening on $port that is not one
# of $1, and for it to accept a connection on loopback.
serving() {
	local i now
	for i in $(seq 100); do
		now=$(listeners "$port")
		if [ -n "$now" ] && [ "$now" != "$1" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	return 1
}

conf_same=false ht_same=false
cmp -s "$new_conf" "$conf" && conf_same=true
cmp -s "$new_ht" "$htpasswd" && ht_same=true

if ! squid -k check -f "$conf" >/dev/null 2>&1; then
	# squid does not run: start it with the new files.
	mv -f "$new_ht" "$htpasswd"
	mv -f "$new_conf" "$conf"
	start_squid || fail "squid did not run, and does not start with the new configuration"
	serving "" || fail "squid did not run, and does not listen on port $port after a start"
	record applied
	exit 0
fi

if $conf_same && $ht_same; then
	record unchanged
	exit 0
fi

if $conf_same; then
	mv -f "$new_ht" "$htpasswd"
	record applied
	exit 0
fi

ports=$port
old_port=$(cat "$state/port" 2>/dev/null || true)
case $old_port in '' | "$port" | 0* | *[!0-9]*) ;; *) ports="$port, $old_port" ;; esac
before=$(listeners "$port")
cp -p "$conf" "$old_conf"
cp -p "$htpasswd" "$old_ht" 2>/dev/null || true
guarded=true
nft -f - <<EOF || fail "cannot hold new connections back during the reconfigure (nft)"
table inet egressproxy_reload
delete table inet egressproxy_reload
table inet egressproxy_reload {
	chain input {
		type filter hook input priority filter - 10; policy accept;
		iifname != "lo" tcp dport { $ports } tcp flags & (syn | ack) == syn drop
	}
}
EOF
# Let squid accept what is already in its backlog.
sleep 0.1
$ht_same || mv -f "$new_ht" "$htpasswd"
mv -f "$new_conf" "$conf"
if squid -k reconfigure -f "$conf" >/dev/null 2>&1 && serving "$before"; then
	nft delete table inet egressproxy_reload 2>/dev/null || true
	guarded=false
	record applied
	exit 0
fi
# Put the previous files back and have squid serve them again.
before=$(listeners "$port")
mv -f "$old_conf" "$conf"
[ -s "$old_ht" ] && mv -f "$old_ht" "$htpasswd"
squid -k reconfigure -f "$conf" >/dev/null 2>&1 && serving "$before" || start_squid || true
fail "squid did not listen on port $port within 10 s of the reconfigure; the previous configuration is back"
`

// trafficScript counts squid's access log from the journal (local4, see
// AccessLogSyslog) with squid.TrafficAWK. The counts and the cursor of the
// last entry they include share one line of TrafficPath, written at once,
// so a restart or a reboot goes on from there: it neither loses counts nor
// counts a line twice (journalctl's own --cursor-file is written only when
// it exits, which a follower killed by systemd never does). The first start
// reads the whole journal, which holds only this VM's squid. awk's copy of
// each line goes nowhere: the journal has it already.
func trafficScript(state, awkPath string) string {
	return fmt.Sprintf(`#!/bin/sh
# Written by provider-egressproxy: counts the requests squid served.
state=%[1]s
cursor=$(sed -n 's/.* cursor=\([^ ]*\).*/\1/p' "$state" 2>/dev/null | head -n 1)
case $cursor in s=*\;i=*) ;; *) cursor= ;; esac
set -- --follow --no-tail --all --output=json --output-fields=MESSAGE SYSLOG_FACILITY=%[2]d
[ -z "$cursor" ] || set -- "$@" "--after-cursor=$cursor"
# Each entry goes down the pipe as it comes (journalctl writes to stdout).
if command -v stdbuf >/dev/null; then set -- stdbuf -oL journalctl "$@"; else set -- journalctl "$@"; fi
"$@" | exec awk %[3]s -v journal=1 -v out="$state" -v init="$state" -f %[4]s
`, state, syslogFacilityLocal4, squid.AWKLineByLine, awkPath)
}

// trafficUnit runs trafficScript.
var trafficUnit = fmt.Sprintf(`# Written by provider-egressproxy.
[Unit]
Description=Count the requests squid served, from its access log in the journal
After=systemd-journald.service squid.service

[Service]
ExecStart=/bin/sh %s
StandardOutput=null
Restart=always
RestartSec=2
StateDirectory=egressproxy
Nice=10

[Install]
WantedBy=multi-user.target
`, trafficScriptPath)

// squidJournal lifts journald's per-unit rate limit for squid: every
// access log line must reach the traffic counter.
const squidJournal = `# Written by provider-egressproxy.
[Service]
LogRateLimitIntervalSec=0
`
