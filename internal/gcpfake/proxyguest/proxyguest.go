// Package proxyguest stands in for the guest of every egress proxy VM in a
// GCE fake. The fake runs no VM, so without it no GCPProxy becomes Ready:
// while an instance runs and lets its guest write guest attributes, Run
// writes what the startup-script's reporter and metadata watcher write on
// GCE (see internal/backend/gcp/guest.go and startup.go): that squid serves
// the configuration its metadata names, that the watcher applied it (so a
// metadata change is "applied" at the next round, as the real watcher
// applies it live), zero traffic counters, and a boot ID that changes only
// when the VM starts again.
package proxyguest

import (
	"context"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/uuid"

	"github.com/egressproxy/provider-egressproxy/internal/backend/gcp"
	"github.com/egressproxy/provider-egressproxy/internal/gcpfake"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// DefaultEvery is how often Run reports: a new VM is Ready about a second
// after it runs, and reports stay well within what the backend takes for
// fresh.
const DefaultEvery = time.Second

// Run reports for every proxy VM of s every interval, until ctx is done.
func Run(ctx context.Context, s *gcpfake.Server, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		ReportAll(s, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ReportAll reports once, at now, for every running proxy VM of s.
func ReportAll(s *gcpfake.Server, now time.Time) {
	for _, inst := range s.Instances() {
		sum := metadata(inst, gcp.MetadataConfigChecksum)
		if inst.GetStatus() != "RUNNING" || sum == "" || !strings.EqualFold(metadata(inst, gcp.MetadataEnableGuestAttributes), "true") {
			continue
		}
		project, zone, ok := projectZone(inst.GetSelfLink())
		if !ok {
			continue
		}
		// The instance may be gone by now; the next round sees that.
		for _, a := range []struct{ path, value string }{
			{gcp.GuestTrafficPath, squid.Traffic{}.String()},
			{gcp.GuestBootIDPath, bootID(inst)},
			{gcp.GuestApplyPath, gcp.GuestReport(gcp.GuestApplied, gcp.AppliedConfig(sum, metadata(inst, gcp.MetadataHtpasswd)), now, "")},
			{gcp.GuestAttributePath, gcp.GuestReport(gcp.GuestServing, sum, now, "")},
		} {
			_ = s.SetGuestAttribute(project, zone, inst.GetName(), a.path, a.value)
		}
	}
}

// bootID is the same for one run of an instance: a new instance, or a
// start after a stop, has a new one.
func bootID(inst *computepb.Instance) string {
	ns := uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://egressproxy.io/gcp-fake/boot-id"))
	return uuid.NewSHA1(ns, []byte(strconv.FormatUint(inst.GetId(), 10)+"/"+inst.GetLastStartTimestamp())).String()
}

func metadata(inst *computepb.Instance, key string) string {
	for _, it := range inst.GetMetadata().GetItems() {
		if it.GetKey() == key {
			return it.GetValue()
		}
	}
	return ""
}

// projectZone reads them from .../projects/P/zones/Z/instances/N.
func projectZone(selfLink string) (string, string, bool) {
	_, rest, ok := strings.Cut(selfLink, "/projects/")
	f := strings.Split(rest, "/")
	if !ok || len(f) < 5 || f[1] != "zones" {
		return "", "", false
	}
	return f[0], f[2], true
}
