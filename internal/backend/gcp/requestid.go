/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// requestIDNamespace scopes the name-based UUIDs of request IDs, so they
// never collide with another program's UUIDv5.
const requestIDNamespace = "https://egressproxy.io/gce/request-id"

// requestID returns a deterministic request ID: a version 5 (SHA-1,
// name-based) UUID of parts. It is never the zero UUID, which GCE refuses.
//
// GCE answers a mutation that repeats a request ID seen in the project with
// the operation the first one started, and changes nothing. So a Create
// that crashed after its insert, or a reconcile that lost the response,
// sends the same insert again and gets the same operation back: nothing is
// made twice, and a failed insert is found again and reported.
func requestID(parts ...string) string {
	ns := uuid.NewSHA1(uuid.NameSpaceURL, []byte(requestIDNamespace))
	return uuid.NewSHA1(ns, []byte(strings.Join(parts, "\x00"))).String()
}

// epoch returns the retry window now falls in. Request IDs of inserts
// include it: within a window a failed insert is replayed (reported without
// trying again), and the first reconcile of the next window tries again.
// This bounds real insert attempts to one per window, whatever the
// reconcile rate.
func epoch(now time.Time, window time.Duration) string {
	if window <= 0 {
		window = DefaultRetryInterval
	}
	return strconv.FormatInt(now.UnixNano()/int64(window), 10)
}
