/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"google.golang.org/protobuf/proto"
)

// Ready = serves. The provider may not reach the VM's network at all, so
// the guest says whether squid serves: the startup-script installs a
// reporter that probes squid in the guest (running, squid.conf is the
// rendered one, answers HTTP on the proxy port) and writes the verdict to
// the guest attribute GuestAttributePath through the metadata server, at
// boot and every GuestReportInterval. Observe reads it with one
// instances.getGuestAttributes call.

// Guest attributes of the instance.
const (
	// MetadataEnableGuestAttributes lets the guest write guest attributes.
	MetadataEnableGuestAttributes = "enable-guest-attributes"
	// GuestAttributePath is where the guest reports: "namespace/key".
	GuestAttributePath = "egressproxy/state"
)

// States a guest reports.
const (
	GuestStarting = "starting"
	GuestServing  = "serving"
	GuestFailed   = "failed"
)

const (
	// GuestReportInterval is how often the guest reports.
	GuestReportInterval = 30 * time.Second
	// guestReportMaxAge is how old a report may be before Observe takes the
	// guest for gone: several missed reports, and room for clock skew.
	guestReportMaxAge = 3 * time.Minute
)

const (
	errFmtGetGuest = "cannot get guest attribute %s of instance %s in zone %s"

	msgServing         = "the VM is running; its guest reports that squid serves the rendered configuration"
	msgFmtWaitGuest    = "the VM is running at %s; waiting for the guest to report that squid serves the rendered configuration (%s)"
	msgFmtGuestFailed  = "the VM is running at %s; its guest reports that squid does not serve: %s"
	msgGuestNoReport   = "no report yet"
	msgGuestStarting   = "the startup-script runs"
	msgFmtGuestOld     = "squid serves configuration %.12s"
	msgFmtGuestStale   = "its last report is from %s"
	msgFmtGuestUnknown = "unreadable report %q"
)

// GuestReport formats what the guest writes to GuestAttributePath:
// "<state> <config checksum> <unix time>[ <reason>]". The startup-script's
// reporter writes the same; tools that stand in for a guest (gcp-fake) use
// this.
func GuestReport(state, checksum string, at time.Time, reason string) string {
	v := state + " " + checksum + " " + strconv.FormatInt(at.Unix(), 10)
	if reason != "" {
		v += " " + reason
	}
	return v
}

// guestReport is a parsed report.
type guestReport struct {
	state, checksum, reason string
	at                      time.Time
}

func parseGuestReport(v string) (guestReport, bool) {
	f := strings.SplitN(strings.TrimSpace(v), " ", 4)
	if len(f) < 3 {
		return guestReport{}, false
	}
	sec, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return guestReport{}, false
	}
	r := guestReport{state: f[0], checksum: f[1], at: time.Unix(sec, 0)}
	if len(f) == 4 {
		r.reason = f[3]
	}
	return r, true
}

// guestState returns the guest's report, or "" when it has written none.
func (b *Backend) guestState(ctx context.Context, s spec) (string, error) {
	ctx, cancel := b.call(ctx)
	defer cancel()
	ga, err := b.svc.instances.GetGuestAttributes(ctx, &computepb.GetGuestAttributesInstanceRequest{
		Project: b.project, Zone: s.zone, Instance: s.name, VariableKey: proto.String(GuestAttributePath),
	})
	if isNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", errors.Wrapf(classify(err), errFmtGetGuest, GuestAttributePath, s.name, s.zone)
	}
	return ga.GetVariableValue(), nil
}

// guestReady tells from the guest's report v whether squid serves the
// configuration whose checksum is sum, and else says what Ready waits for.
func guestReady(v, sum, ip string, now time.Time) (bool, string) {
	wait := func(why string) (bool, string) { return false, fmt.Sprintf(msgFmtWaitGuest, ip, why) }
	if v == "" {
		return wait(msgGuestNoReport)
	}
	r, ok := parseGuestReport(v)
	if !ok {
		return wait(fmt.Sprintf(msgFmtGuestUnknown, v))
	}
	if age := now.Sub(r.at); age > guestReportMaxAge || age < -guestReportMaxAge {
		return wait(fmt.Sprintf(msgFmtGuestStale, r.at.UTC().Format(time.RFC3339)))
	}
	switch {
	case r.checksum != sum:
		// An older VM, or one whose startup-script has not rewritten it yet.
		return wait(fmt.Sprintf(msgFmtGuestOld, r.checksum))
	case r.state == GuestServing:
		return true, msgServing
	case r.state == GuestFailed:
		if len(r.reason) > maxReport {
			r.reason = r.reason[:maxReport]
		}
		return false, fmt.Sprintf(msgFmtGuestFailed, ip, r.reason)
	case r.state == GuestStarting:
		return wait(msgGuestStarting)
	}
	return wait(fmt.Sprintf(msgFmtGuestUnknown, v))
}
