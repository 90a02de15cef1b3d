/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"context"
	"strconv"
	"strings"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"google.golang.org/protobuf/proto"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

const (
	errFmtDelete      = "cannot delete %s"
	errFmtSetMetadata = "cannot set the metadata of %s"
	errFmtSetLabels   = "cannot set the labels of %s"
	errFmtSetTags     = "cannot set the network tags of %s"
	errFmtApply       = "the guest of instance %s cannot apply configuration %.12s (it keeps serving the one before): %s"
)

// changeWait bounds how long Update waits for a setMetadata, setLabels or
// setTags operation; an operation still pending then is found again by its
// request ID.
const changeWait = 30 * time.Second

// Update repairs the address (re-reserved when deleted) and the firewall
// rule (re-inserted when deleted, patched when changed: client CIDRs and
// port apply at once), then brings the instance to d:
//
//   - It replaces the instance when it is stopped or terminated, or differs
//     in what only a new VM changes (replaceDiff: machine type, service
//     account, external IP, guest version). Replacing means deleting it:
//     once it is gone Observe reports NotFound and Create makes it again
//     with the same name and static address, so the egress IP stays.
//   - Otherwise it sets new labels (instances.setLabels; the ownership
//     labels are among them) and network tags (instances.setTags) on the
//     running VM, and applies a new configuration or new credentials live
//     (liveDiff): it writes the new metadata with instances.setMetadata,
//     and the guest's watcher, which waits on the metadata server for a
//     change, hands them to the running squid. No reboot, and tunnels stay.
//   - When the metadata is current but the guest reports that it could not
//     apply it (guest attribute GuestApplyPath), it returns that reason.
//
// An instance that is missing is created, as Create would.
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
	// The htpasswd file in the metadata is kept while it accepts the
	// credentials: its salt then does not turn into a change.
	pc, err := renderConfig(b.verifier, d, []byte(metadataValue(inst, MetadataHtpasswd)))
	if err != nil {
		return err
	}
	w := wanted(s, d, pc.checksum, ip)
	if st, _ := instanceState(inst.GetStatus()); st == commonv1alpha1.StateStopped || st == commonv1alpha1.StateTerminated || len(replaceDiff(w, inst)) > 0 {
		_, err = b.deleteInstance(ctx, s.zone, inst)
		return err
	}
	// Labels, tags and metadata have a fingerprint each: one change does
	// not make the instance's other fingerprints stale.
	if len(labelDiff(w.Labels, inst.GetLabels())) > 0 {
		if err := b.setLabels(ctx, s, inst, w.Labels); err != nil {
			return err
		}
	}
	if len(tagDiff(w.Tags, inst.GetTags().GetItems())) > 0 {
		if err := b.setTags(ctx, s, inst, w.Tags); err != nil {
			return err
		}
	}
	if len(liveDiff(b.verifier, w, inst)) > 0 {
		return b.setMetadata(ctx, s, inst, pc)
	}
	return b.applyError(ctx, s, pc)
}

// setLabels replaces the labels of inst with want and the labels Google
// added (labelsToSet), with the labelFingerprint inst was read with, so
// labels someone set since are not overwritten (412; the next reconcile
// reads them again). The request ID names that fingerprint and the labels,
// as setMetadata's does.
func (b *Backend) setLabels(ctx context.Context, s spec, inst *computepb.Instance, want map[string]string) error {
	labels := labelsToSet(want, inst.GetLabels())
	fp := inst.GetLabelFingerprint()
	kv := make([]string, 0, len(labels))
	for _, k := range sortedKeys(labels) {
		kv = append(kv, k+"="+labels[k])
	}
	rid := requestID(b.project, s.zone, s.name, "instances.setLabels", fp, strings.Join(kv, ","))
	fn := func(ctx context.Context, rid string) (*compute.Operation, error) {
		return b.svc.instances.SetLabels(ctx, &computepb.SetLabelsInstanceRequest{
			Project: b.project, Zone: s.zone, Instance: s.name, RequestId: proto.String(rid),
			InstancesSetLabelsRequestResource: &computepb.InstancesSetLabelsRequest{LabelFingerprint: proto.String(fp), Labels: labels},
		})
	}
	return b.change(ctx, "instance "+s.name, errFmtSetLabels, fn, rid)
}

// setTags replaces the network tags of inst with want, with the tags
// fingerprint inst was read with. The firewall rule targets the tag named
// like the instance, which want always holds (networkTags).
func (b *Backend) setTags(ctx context.Context, s spec, inst *computepb.Instance, want []string) error {
	tags := sortedSet(want)
	fp := inst.GetTags().GetFingerprint()
	rid := requestID(b.project, s.zone, s.name, "instances.setTags", fp, strings.Join(tags, ","))
	fn := func(ctx context.Context, rid string) (*compute.Operation, error) {
		return b.svc.instances.SetTags(ctx, &computepb.SetTagsInstanceRequest{
			Project: b.project, Zone: s.zone, Instance: s.name, RequestId: proto.String(rid),
			TagsResource: &computepb.Tags{Fingerprint: proto.String(fp), Items: tags},
		})
	}
	return b.change(ctx, "instance "+s.name, errFmtSetTags, fn, rid)
}

// change sends a change of a running instance (setMetadata, setLabels,
// setTags) with request ID rid, and waits up to changeWait for its
// operation. Wait reports an operation's error only with
// httpErrorStatusCode, and a timeout only means "not done yet": the
// operation decides.
func (b *Backend) change(ctx context.Context, what, errFmt string, fn send, rid string) error {
	cctx, cancel := b.call(ctx)
	defer cancel()
	op, err := fn(cctx, rid)
	if err != nil {
		return errors.Wrapf(classifyMutation(err), errFmt, what)
	}
	wctx, wcancel := context.WithTimeout(ctx, changeWait)
	defer wcancel()
	_ = op.Wait(wctx)
	return errors.Wrapf(operationError(what, op.Proto()), errFmt, what)
}

// setMetadata replaces the metadata of inst with pc's. It sends the
// fingerprint inst was read with, so a change someone made since is not
// overwritten (412; the next reconcile reads it again). The request ID
// names that fingerprint and what is written: a retry after a lost response
// replays the operation, and the next change is a request of its own.
func (b *Backend) setMetadata(ctx context.Context, s spec, inst *computepb.Instance, pc proxyConfig) error {
	md, err := buildMetadata(pc)
	if err != nil {
		return err
	}
	fp := inst.GetMetadata().GetFingerprint()
	md.Fingerprint = proto.String(fp)
	rid := requestID(b.project, s.zone, s.name, "instances.setMetadata", fp, pc.checksum, squid.Checksum(pc.htpasswd))
	fn := func(ctx context.Context, rid string) (*compute.Operation, error) {
		return b.svc.instances.SetMetadata(ctx, &computepb.SetMetadataInstanceRequest{
			Project: b.project, Zone: s.zone, Instance: s.name, MetadataResource: md, RequestId: proto.String(rid),
		})
	}
	return b.change(ctx, "instance "+s.name, errFmtSetMetadata, fn, rid)
}

// applyError returns why the guest could not apply pc, as it reported, or
// nil.
func (b *Backend) applyError(ctx context.Context, s spec, pc proxyConfig) error {
	ga, err := b.guestAttributes(ctx, s)
	if err != nil {
		return err
	}
	r, ok := parseGuestReport(ga[GuestApplyPath])
	if !ok || r.state != GuestFailed || r.checksum != AppliedConfig(pc.checksum, string(pc.htpasswd)) {
		return nil
	}
	return backend.Permanent(errors.Errorf(errFmtApply, s.name, pc.checksum, r.reason))
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
