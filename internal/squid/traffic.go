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
	seen := 0
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
			seen++
		}
	}
	return t, seen == len(trafficKeys)
}

// TrafficAWK is an awk program (POSIX awk, mawk 1.3.4 included; no single
// quote inside, so it can be passed in a shell's single quotes) that reads
// squid's access log on stdin and keeps the file named by its variable
// "out" holding one Traffic line (see String) with the counts so far.
// TODO(issue 40, WP1): the program; the stub only fixes the contract.
const TrafficAWK = ``
