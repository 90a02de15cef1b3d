/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"context"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	gax "github.com/googleapis/gax-go/v2"
	"google.golang.org/api/option"
)

const (
	errNewInstancesClient = "cannot create the Compute Engine instances client"
	errNewAddressesClient = "cannot create the Compute Engine addresses client"
	errNewFirewallsClient = "cannot create the Compute Engine firewalls client"
)

// instancesAPI is the part of the instances client the backend uses. Each
// returned Operation polls its zone operation through the client's own
// operations client, so no separate operations client is needed.
type instancesAPI interface {
	Get(ctx context.Context, req *computepb.GetInstanceRequest, opts ...gax.CallOption) (*computepb.Instance, error)
	GetGuestAttributes(ctx context.Context, req *computepb.GetGuestAttributesInstanceRequest, opts ...gax.CallOption) (*computepb.GuestAttributes, error)
	Insert(ctx context.Context, req *computepb.InsertInstanceRequest, opts ...gax.CallOption) (*compute.Operation, error)
	SetMetadata(ctx context.Context, req *computepb.SetMetadataInstanceRequest, opts ...gax.CallOption) (*compute.Operation, error)
	SetLabels(ctx context.Context, req *computepb.SetLabelsInstanceRequest, opts ...gax.CallOption) (*compute.Operation, error)
	SetTags(ctx context.Context, req *computepb.SetTagsInstanceRequest, opts ...gax.CallOption) (*compute.Operation, error)
	Delete(ctx context.Context, req *computepb.DeleteInstanceRequest, opts ...gax.CallOption) (*compute.Operation, error)
	AggregatedList(ctx context.Context, req *computepb.AggregatedListInstancesRequest, opts ...gax.CallOption) *compute.InstancesScopedListPairIterator
	List(ctx context.Context, req *computepb.ListInstancesRequest, opts ...gax.CallOption) *compute.InstanceIterator
	Close() error
}

// addressesAPI is the part of the addresses client the backend uses.
type addressesAPI interface {
	Get(ctx context.Context, req *computepb.GetAddressRequest, opts ...gax.CallOption) (*computepb.Address, error)
	Insert(ctx context.Context, req *computepb.InsertAddressRequest, opts ...gax.CallOption) (*compute.Operation, error)
	Delete(ctx context.Context, req *computepb.DeleteAddressRequest, opts ...gax.CallOption) (*compute.Operation, error)
	SetLabels(ctx context.Context, req *computepb.SetLabelsAddressRequest, opts ...gax.CallOption) (*compute.Operation, error)
	List(ctx context.Context, req *computepb.ListAddressesRequest, opts ...gax.CallOption) *compute.AddressIterator
	Close() error
}

// firewallsAPI is the part of the firewalls client the backend uses.
type firewallsAPI interface {
	Get(ctx context.Context, req *computepb.GetFirewallRequest, opts ...gax.CallOption) (*computepb.Firewall, error)
	Insert(ctx context.Context, req *computepb.InsertFirewallRequest, opts ...gax.CallOption) (*compute.Operation, error)
	Patch(ctx context.Context, req *computepb.PatchFirewallRequest, opts ...gax.CallOption) (*compute.Operation, error)
	Delete(ctx context.Context, req *computepb.DeleteFirewallRequest, opts ...gax.CallOption) (*compute.Operation, error)
	List(ctx context.Context, req *computepb.ListFirewallsRequest, opts ...gax.CallOption) *compute.FirewallIterator
	Close() error
}

// services are the REST clients of one provider config.
type services struct {
	instances instancesAPI
	addresses addressesAPI
	firewalls firewallsAPI
}

// newServices builds the REST clients with the same options, so they share
// one set of credentials (and its token cache).
func newServices(ctx context.Context, opts ...option.ClientOption) (*services, error) {
	s := &services{}
	i, err := compute.NewInstancesRESTClient(ctx, opts...)
	if err != nil {
		return nil, errors.Wrap(err, errNewInstancesClient)
	}
	s.instances = i
	a, err := compute.NewAddressesRESTClient(ctx, opts...)
	if err != nil {
		_ = s.close()
		return nil, errors.Wrap(err, errNewAddressesClient)
	}
	s.addresses = a
	f, err := compute.NewFirewallsRESTClient(ctx, opts...)
	if err != nil {
		_ = s.close()
		return nil, errors.Wrap(err, errNewFirewallsClient)
	}
	s.firewalls = f
	return s, nil
}

// close closes every client that was built; the first error wins.
func (s *services) close() error {
	var first error
	for _, c := range []interface{ Close() error }{s.instances, s.addresses, s.firewalls} {
		if c == nil {
			continue
		}
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
