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

	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// Ready = serves. The provider may not reach the VM's network at all, so
// the guest says whether squid serves: the startup-script installs a
// reporter that probes squid in the guest (running, squid.conf is the
// rendered one, answers HTTP on the proxy port) and writes the verdict to
// the guest attribute GuestAttributePath through the metadata server, at
// boot and every GuestReportInterval. Observe reads it with one
// instances.getGuestAttributes call.

// Guest attributes of the instance, all in namespace GuestNamespace, which
// Observe reads with one call.
const (
	// MetadataEnableGuestAttributes lets the guest write guest attributes.
	MetadataEnableGuestAttributes = "enable-guest-attributes"
	// GuestNamespace holds every attribute the guest writes.
	GuestNamespace = "egressproxy"
	// GuestAttributePath is where the guest reports whether squid serves:
	// "namespace/key", a GuestReport.
	GuestAttributePath = GuestNamespace + "/state"
	// GuestApplyPath is where the guest's watcher reports how its last live
	// apply went: a GuestReport with state GuestApplied or GuestFailed.
	GuestApplyPath = GuestNamespace + "/apply"
	// GuestTrafficPath holds the guest's traffic counters, a squid.Traffic
	// line, written with each report.
	GuestTrafficPath = GuestNamespace + "/traffic"
	// GuestBootIDPath holds the guest's boot ID, written with each report:
	// it changes when the VM reboots.
	GuestBootIDPath = GuestNamespace + "/boot-id"
)

// States a guest reports.
const (
	GuestStarting = "starting"
	GuestServing  = "serving"
	GuestFailed   = "failed"
	// GuestApplied is the watcher's report of a live apply that worked.
	GuestApplied = "applied"
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
	msgFmtApplyPending = "the guest has not applied configuration %.12s and the credentials yet"
	msgFmtApplyFailed  = "the guest cannot apply the configuration (it serves the one before): %s"
	msgFmtApplying     = "the VM is running; its guest reports that squid serves configuration %.12s, and is applying %.12s"
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

// AppliedConfig names, in the watcher's GuestApplyPath reports, what it
// applied: the squid configuration's checksum and a digest of the htpasswd
// file, so a new password is seen applied (or not) as a new configuration
// is. The guest's watcher computes the same from the files it applies.
func AppliedConfig(checksum, htpasswd string) string {
	return checksum + "/" + squid.ChecksumString(htpasswd)[:16]
}

// applyDiff says, from the watcher's last report v, whether the guest still
// applies want (AppliedConfig of the instance's metadata) or could not.
// Nothing is reported before the watcher's first pass.
func applyDiff(v, want string) string {
	r, ok := parseGuestReport(v)
	switch {
	case !ok:
		return ""
	case r.checksum != want:
		return fmt.Sprintf(msgFmtApplyPending, want)
	case r.state == GuestFailed:
		if len(r.reason) > maxReport {
			r.reason = r.reason[:maxReport]
		}
		return fmt.Sprintf(msgFmtApplyFailed, r.reason)
	}
	return ""
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

// guestAttributes returns what the guest wrote in GuestNamespace, by
// "namespace/key"; none when it has written nothing.
func (b *Backend) guestAttributes(ctx context.Context, s spec) (map[string]string, error) {
	ctx, cancel := b.call(ctx)
	defer cancel()
	ga, err := b.svc.instances.GetGuestAttributes(ctx, &computepb.GetGuestAttributesInstanceRequest{
		Project: b.project, Zone: s.zone, Instance: s.name, QueryPath: proto.String(GuestNamespace + "/"),
	})
	if isNotFound(err) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, errors.Wrapf(classify(err), errFmtGetGuest, GuestNamespace+"/", s.name, s.zone)
	}
	out := make(map[string]string, len(ga.GetQueryValue().GetItems()))
	for _, it := range ga.GetQueryValue().GetItems() {
		out[it.GetNamespace()+"/"+it.GetKey()] = it.GetValue()
	}
	return out, nil
}

// guestServes is what the guest's report says.
type guestServes struct {
	// ready: squid serves a configuration the provider rendered; not
	// necessarily sum, since a change is applied while squid serves.
	ready bool
	// served is the checksum of the configuration squid serves, when
	// ready.
	served string
	// at is the time of the report, when ready.
	at  time.Time
	msg string
}

// guestReady tells from the guest's report v whether squid serves, and
// else says what Ready waits for. sum is the configuration d asks for: a
// guest that serves another one is applying it (or could not: Update then
// says why) and stays Ready.
func guestReady(v, sum, ip string, now time.Time) guestServes {
	wait := func(why string) guestServes { return guestServes{msg: fmt.Sprintf(msgFmtWaitGuest, ip, why)} }
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
	switch r.state {
	case GuestServing:
		g := guestServes{ready: true, served: r.checksum, at: r.at, msg: msgServing}
		if r.checksum != sum {
			g.msg = fmt.Sprintf(msgFmtApplying, r.checksum, sum)
		}
		return g
	case GuestFailed:
		if len(r.reason) > maxReport {
			r.reason = r.reason[:maxReport]
		}
		return guestServes{msg: fmt.Sprintf(msgFmtGuestFailed, ip, r.reason)}
	case GuestStarting:
		return wait(msgGuestStarting)
	}
	return wait(fmt.Sprintf(msgFmtGuestUnknown, v))
}
