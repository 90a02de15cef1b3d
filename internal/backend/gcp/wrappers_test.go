/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"context"
	"sync"
	"testing"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	gax "github.com/googleapis/gax-go/v2"
	"google.golang.org/api/googleapi"

	"github.com/egressproxy/provider-egressproxy/internal/gcpfake"
)

// lossyInstances sends inserts, then loses the first lose responses, as a
// provider that crashed (or a connection that broke) right after GCE
// accepted the insert.
type lossyInstances struct {
	instancesAPI
	mu   sync.Mutex
	lose int
}

func (l *lossyInstances) Insert(ctx context.Context, req *computepb.InsertInstanceRequest, opts ...gax.CallOption) (*compute.Operation, error) {
	op, err := l.instancesAPI.Insert(ctx, req, opts...)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil && l.lose > 0 {
		l.lose--
		return nil, errors.New("connection reset by peer")
	}
	return op, err
}

// staleLabels changes the instance's labels, as someone else would, right
// before its first setLabels goes out: that one's fingerprint is stale.
type staleLabels struct {
	instancesAPI
	t    *testing.T
	fake *gcpfake.Server
	done bool
}

func (s *staleLabels) SetLabels(ctx context.Context, req *computepb.SetLabelsInstanceRequest, opts ...gax.CallOption) (*compute.Operation, error) {
	if !s.done {
		s.done = true
		inst, _ := s.fake.Instance(req.GetProject(), req.GetZone(), req.GetInstance())
		l := inst.GetLabels()
		l["someone"] = "else"
		op, err := s.instancesAPI.SetLabels(ctx, &computepb.SetLabelsInstanceRequest{Project: req.GetProject(), Zone: req.GetZone(), Instance: req.GetInstance(),
			InstancesSetLabelsRequestResource: &computepb.InstancesSetLabelsRequest{LabelFingerprint: inst.LabelFingerprint, Labels: l}})
		if err == nil {
			err = op.Wait(ctx)
		}
		if err != nil {
			s.t.Errorf("the other writer's setLabels: %v", err)
		}
	}
	return s.instancesAPI.SetLabels(ctx, req, opts...)
}

// blindAddresses answers the first blind Gets with 404, as a read that
// raced with someone else reserving the address.
type blindAddresses struct {
	addressesAPI
	mu    sync.Mutex
	blind int
}

func (b *blindAddresses) Get(ctx context.Context, req *computepb.GetAddressRequest, opts ...gax.CallOption) (*computepb.Address, error) {
	b.mu.Lock()
	blind := b.blind > 0
	if blind {
		b.blind--
	}
	b.mu.Unlock()
	if blind {
		return nil, &googleapi.Error{Code: 404, Message: "not found", Errors: []googleapi.ErrorItem{{Reason: "notFound"}}}
	}
	return b.addressesAPI.Get(ctx, req, opts...)
}
