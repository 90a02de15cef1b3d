/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"context"
	"strconv"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"google.golang.org/protobuf/proto"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

const errFmtDelete = "cannot delete %s"

// Update repairs the address (re-reserved when deleted) and the firewall
// rule (re-inserted when deleted, patched when changed), then replaces the
// instance when it is stopped or terminated, or differs from d in what
// Compute Engine cannot change in place while it runs: its metadata (the
// proxy configuration and credentials, which cloud-init applies only at
// first boot), labels, tags, machine type, service account or external IP.
// Replacing means deleting it: once it is gone Observe reports NotFound and
// Create makes it again with the same name and static address, so the
// egress IP stays. An instance that is missing is created, as Create would.
func (b *Backend) Update(ctx context.Context, d Desired) error {
	if err := b.life.acquire(); err != nil {
		return err
	}
	defer b.life.release()
	s, err := resolve(d)
	if err != nil {
		return err
	}
	// Observe reads this proxy's parts with GETs until lists made after
	// this write are there.
	defer b.cache.touch(s)
	if err := b.checkPolicy(s, d); err != nil {
		return err
	}
	ip, err := b.ensureAddress(ctx, s, d)
	if err != nil {
		return err
	}
	if err := b.ensureFirewall(ctx, s, d); err != nil {
		return err
	}
	inst, err := b.getInstance(ctx, s.zone, s.name)
	if err != nil {
		return err
	}
	if inst == nil {
		if ip == "" {
			return nil
		}
		return b.ensureInstance(ctx, s, d, ip)
	}
	if !ownedBy(inst.GetLabels(), d.Ownership) {
		return backend.Permanent(errors.Errorf(errFmtNotOurs, "instance "+s.name))
	}
	replace, err := b.needsReplacement(s, d, inst, ip)
	if err != nil || !replace {
		return err
	}
	_, err = b.deleteInstance(ctx, s.zone, inst)
	return err
}

// needsReplacement reports whether inst must be deleted and made again.
func (b *Backend) needsReplacement(s spec, d Desired, inst *computepb.Instance, ip string) (bool, error) {
	if st, _ := instanceState(inst.GetStatus()); st == commonv1alpha1.StateStopped || st == commonv1alpha1.StateTerminated {
		return true, nil
	}
	conf, err := squid.Render(backend.SquidConfig(d))
	if err != nil {
		return false, backend.Permanent(errors.Wrap(err, errRender))
	}
	return len(instanceDiff(b.verifier, wanted(s, d, squid.Checksum(conf), ip), inst)) > 0, nil
}

// deleteInstance deletes inst, and reports whether it is gone. The request ID holds the instance's numeric
// ID, so asking again while the delete is pending replays its operation
// instead of failing with resourceNotReady, and a new instance of the same
// name gets a request ID of its own.
func (b *Backend) deleteInstance(ctx context.Context, zone string, inst *computepb.Instance) (bool, error) {
	name := inst.GetName()
	what := "instance " + name
	fn := func(ctx context.Context, rid string) (*compute.Operation, error) {
		return b.svc.instances.Delete(ctx, &computepb.DeleteInstanceRequest{Project: b.project, Zone: zone, Instance: name, RequestId: proto.String(rid)})
	}
	gone, err := b.remove(ctx, what, fn, b.project, zone, name, "instances.delete", strconv.FormatUint(inst.GetId(), 10), epoch(b.now(), b.retry))
	return gone, errors.Wrapf(err, errFmtDelete, what)
}
