/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package function

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composite"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/function/input/v1alpha1"
)

const (
	errGetAtProvider = "cannot read status.atProvider of the composed managed resource"
	errFmtSetStatus  = "cannot set %s of the composite resource"
)

// observation reads what the backend reports about the proxy from the
// observed managed resource, if there is one yet.
func observation(oc *resource.ObservedComposed) (commonv1alpha1.ProxyObservation, error) {
	o := commonv1alpha1.ProxyObservation{}
	if oc == nil {
		return o, nil
	}
	err := oc.Resource.GetValueInto("status.atProvider", &o)
	if fieldpath.IsNotFound(err) {
		return o, nil
	}
	return o, errors.Wrap(err, errGetAtProvider)
}

// setStatus sets the XR's status (see the XRD) from the observation. The
// backend is known before anything is observed; fields the backend has not
// reported yet are left out rather than set empty.
func setStatus(xr *composite.Unstructured, b v1alpha1.Backend, o commonv1alpha1.ProxyObservation) error {
	fields := []struct{ path, value string }{
		{path: "status.backend", value: string(b)},
		{path: "status.endpoint", value: o.Endpoint},
		{path: "status.instanceID", value: o.InstanceID},
	}
	// The first egress IP is the one to allowlist at a destination; a
	// Kubernetes proxy on several nodes reports more on its managed resource.
	if len(o.EgressIPs) > 0 {
		fields = append(fields, struct{ path, value string }{path: "status.egressIP", value: o.EgressIPs[0]})
	}
	for _, f := range fields {
		if f.value == "" {
			continue
		}
		if err := xr.SetString(f.path, f.value); err != nil {
			return errors.Wrapf(err, errFmtSetStatus, f.path)
		}
	}
	return nil
}

// connectionDetails returns the observed managed resource's connection
// details (endpoint, port, username, password, url) as the XR's, on top of
// any an earlier pipeline step set.
func connectionDetails(desired resource.ConnectionDetails, oc *resource.ObservedComposed) resource.ConnectionDetails {
	out := resource.ConnectionDetails{}
	for k, v := range desired {
		out[k] = v
	}
	if oc == nil {
		return out
	}
	for k, v := range oc.ConnectionDetails {
		out[k] = v
	}
	return out
}
