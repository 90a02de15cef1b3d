/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package squid

import (
	"fmt"
	"strconv"
	"strings"
)

// Traffic counts what one squid did since it started. The proxy's own
// counter (TrafficAWK, reading the access log) writes it as one line that
// ParseTraffic reads, so every backend reports the same figures the same way.
type Traffic struct {
	// Allowed requests (and CONNECT tunnels) squid served.
	Allowed uint64
	// DeniedDestination requests were refused for their destination (not
	// allowed, private, metadata, port or method).
	DeniedDestination uint64
	// DeniedClient requests came from outside the client CIDRs.
	DeniedClient uint64
	// DeniedAuth requests carried no or wrong credentials (407).
	DeniedAuth uint64
	// BytesToClients and BytesFromClients count the bytes squid sent to and
	// read from its clients.
	BytesToClients   uint64
	BytesFromClients uint64
}

// trafficKeys are the fields of a traffic line, in order.
var trafficKeys = []string{"allowed", "denied_destination", "denied_client", "denied_auth", "bytes_to_clients", "bytes_from_clients"}

func (t *Traffic) fields() []*uint64 {
	return []*uint64{&t.Allowed, &t.DeniedDestination, &t.DeniedClient, &t.DeniedAuth, &t.BytesToClients, &t.BytesFromClients}
}

// String formats t as the line ParseTraffic reads:
// "egressproxy-traffic allowed=1 denied_destination=2 ...".
func (t Traffic) String() string {
	var b strings.Builder
	b.WriteString(trafficPrefix)
	for i, f := range t.fields() {
		fmt.Fprintf(&b, " %s=%d", trafficKeys[i], *f)
	}
	return b.String()
}

// trafficPrefix starts every traffic line, so a line is never mistaken for
// another program's output.
const trafficPrefix = "egressproxy-traffic"

// ParseTraffic reads a line written by String (or by TrafficAWK). It is false
// when line is not one: a backend then reports no figures rather than wrong
// ones. Unknown fields are ignored so a newer guest can add some.
func ParseTraffic(line string) (Traffic, bool) {
	f := strings.Fields(strings.TrimSpace(line))
	if len(f) == 0 || f[0] != trafficPrefix {
		return Traffic{}, false
	}
	var t Traffic
	seen := map[string]bool{}
	for _, kv := range f[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return Traffic{}, false
		}
		for i, key := range trafficKeys {
			if key != k {
				continue
			}
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return Traffic{}, false
			}
			*t.fields()[i] = n
			seen[k] = true
		}
	}
	if len(seen) != len(trafficKeys) {
		return Traffic{}, false
	}
	return t, true
}

// ProbeURL is the URL the provider's own health probes request from inside
// the instance (the KVM guest-agent probe, the GCE reporter). squid refuses
// it by its own rules, and TrafficAWK neither prints nor counts a request for
// it from loopback, so probes do not show up as denied traffic. A client in
// clientCIDRs cannot hide requests behind it: it never comes from loopback.
const ProbeURL = "http://127.0.0.1:1/"

// AWKLineByLine is the shell words to put after awk, so that mawk (Debian's
// awk) reads its input line by line; other awks get none.
const AWKLineByLine = `$(case $(awk -W version 2>/dev/null) in (mawk*) echo "-W interactive" ;; esac)`

// TrafficAWK is an awk program (POSIX awk, mawk 1.3.4 included; no single
// quote inside, so it can be passed in a shell's single quotes) that reads
// squid's access log (the LogFormat lines, with or without a syslog prefix)
// on stdin, copies every line to stdout, and keeps the file named by its
// variable "out" holding one Traffic line (see String) with the counts so
// far. Run it as
//
//	awk -v out=/path/traffic [-v init=/path/traffic] "$TrafficAWK"
//
// init optionally names a file with an earlier Traffic line to count on
// from (it may be out itself), so counts survive a reboot.
//
// With -v journal=1 it reads the lines of journalctl --output=json instead
// (each entry one JSON line, its MESSAGE squid's line) and adds the cursor of
// the last entry it read to the line it writes (" cursor=..."; ParseTraffic
// ignores it), so counts and position are saved together: whoever starts it
// again passes that cursor to journalctl --after-cursor, and a restart
// neither counts a line twice nor loses one. An entry whose sequence number
// is not after the last one read is skipped: the journal can show one twice
// across a file rotation. A message that is not text (journald writes such
// a MESSAGE as an array of bytes) is not counted.
//
// Run it with AWKLineByLine when its input is a pipe: mawk reads a pipe in
// blocks, so the counts would lag the log by up to a block.
//
// It writes out at start, then after a line whose log time (the second in
// its "time" field) differs from the one of the last write or that is a
// health probe's, and at the end of its input. So it forks about one mv per
// second of log, and the file lags the log by at most the gap to the next
// line of a later second or the next probe: a reader that probes squid and
// then reads the file sees every request logged before its previous probe.
// The write is a rename, so a reader never sees half a line.
//
// Classification, which relies on the order of the http_access rules that
// Render writes (clients first, then credentials, then everything else):
//
//   - TCP_DENIED with status 407: no or wrong credentials (DeniedAuth);
//   - TCP_DENIED with status 403 and no user: refused before authentication,
//     so the client is outside clientCIDRs (DeniedClient);
//   - any other TCP_DENIED: an authenticated request to a destination, port
//     or method the policy refuses (DeniedDestination);
//   - any other request is Allowed, whatever the origin answered.
//
// It neither prints nor counts ProbeURL requests from loopback and the lines
// squid writes for connections closed before a request (a tcpSocket probe:
// "error:transaction-end-before-headers", status 0). Other "error:" lines
// (a malformed request, say) are printed and their bytes counted, but they
// are no request of any class. Bytes are squid's bytes_sent (to clients) and
// bytes_received (from clients), headers included.
//
// Each line is flushed as it is printed: on Kubernetes stdout is the pod's
// log. Where the log already has a home (the journal on a VM), send stdout
// to /dev/null.
const TrafficAWK = `
function load(f,   l, n, i, kv, a) {
	if (f == "" || (getline l < f) <= 0)
		return
	close(f)
	n = split(l, a, " ")
	if (a[1] != "egressproxy-traffic")
		return
	for (i = 2; i <= n; i++)
		if (index(a[i], "cursor=") == 1)
			position(substr(a[i], 8))
		else if (split(a[i], kv, "=") == 2 && (kv[1] in c))
			c[kv[1]] = kv[2] + 0
}
function save(   i, l, tmp) {
	l = "egressproxy-traffic"
	for (i = 1; i <= nk; i++)
		l = l sprintf(" %s=%.0f", k[i], c[k[i]])
	if (cursor != "")
		l = l " cursor=" cursor
	tmp = out ".tmp"
	print l > tmp
	close(tmp)
	system("mv -f " q tmp q " " q out q)
	dirty = 0
}
function hex(h,   i, n) {
	n = 0
	h = tolower(h)
	for (i = 1; i <= length(h); i++)
		n = n * 16 + index("0123456789abcdef", substr(h, i, 1)) - 1
	return n
}
# position takes a journal cursor ("s=ID;i=SEQNUM;b=...") as the last entry
# counted; it is false for an entry at or before the last one counted.
function position(cur,   p, n, id, seq) {
	n = split(cur, p, ";")
	if (n < 2 || index(p[1], "s=") != 1 || index(p[2], "i=") != 1)
		return 0
	id = substr(p[1], 3)
	seq = hex(substr(p[2], 3))
	if (id == seqid && seq <= seqnum)
		return 0
	seqid = id
	seqnum = seq
	cursor = cur
	return 1
}
# entry turns a line of journalctl --output=json into its MESSAGE. It is
# false for an entry seen before (the journal can show one twice across a
# file rotation) and for a message that is not text.
function entry(   i, m) {
	i = index($0, "\"__CURSOR\":\"")
	if (i == 0)
		return 0
	m = substr($0, i + 12)
	if (!position(substr(m, 1, index(m, "\"") - 1)))
		return 0
	i = index($0, "\"MESSAGE\":\"")
	if (i == 0)
		return 0
	m = substr($0, i + 11)
	gsub(/\\\\/, "\001", m)
	gsub(/\\"/, "\002", m)
	m = substr(m, 1, index(m, "\"") - 1)
	gsub(/\002/, "\"", m)
	gsub(/\001/, "\\\\", m)
	$0 = m
	return 1
}
function field(name,   i) {
	i = index($0, ",\"" name "\":")
	if (i == 0)
		return ""
	return substr($0, i + length(name) + 4)
}
BEGIN {
	q = "\047"
	nk = split("allowed denied_destination denied_client denied_auth bytes_to_clients bytes_from_clients", k, " ")
	for (i = 1; i <= nk; i++)
		c[k[i]] = 0
	load(init)
	if (out != "")
		save()
	last = ""
}
journal && !entry() {
	next
}
{
	i = index($0, "\"time\":\"")
	if (i == 0) {
		print
		fflush()
		next
	}
	t = substr($0, i + 8, 20)
	probe = (index($0, ",\"url\":\"` + ProbeURL + `\",") > 0 && (index($0, ",\"client\":\"127.0.0.1\",") > 0 || index($0, ",\"client\":\"::1\",") > 0))
	probe = probe || (index($0, ",\"url\":\"error:transaction-end-before-headers\",") > 0 && field("status") + 0 == 0)
	if (!probe) {
		print
		fflush()
		c["bytes_to_clients"] += field("bytes_sent") + 0
		c["bytes_from_clients"] += field("bytes_received") + 0
		dirty = 1
		if (index($0, ",\"url\":\"error:") == 0) {
			status = field("status") + 0
			if (index(field("result"), "\"TCP_DENIED") != 1)
				c["allowed"]++
			else if (status == 407)
				c["denied_auth"]++
			else if (status == 403 && index($0, ",\"user\":\"-\",") > 0)
				c["denied_client"]++
			else
				c["denied_destination"]++
		}
	}
	if (dirty && (t != last || probe) && out != "") {
		save()
		last = t
	}
}
END {
	if (dirty && out != "")
		save()
}
`
