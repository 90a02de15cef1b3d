/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package function is function-egressproxy, the composition function that
// turns an EgressProxy claim into exactly one managed resource of the backend
// its Composition names, and reports the proxy's endpoint, egress IP and
// connection details back on the claim.
package function

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/response"

	"github.com/egressproxy/provider-egressproxy/internal/function/input/v1alpha1"
)

const (
	errGetInput       = "cannot read the function input"
	errGetObservedXR  = "cannot read the observed composite resource"
	errGetObservedMRs = "cannot read the observed composed resources"
	errGetDesiredXR   = "cannot read the desired composite resource"
	errGetDesiredMRs  = "cannot read the desired composed resources"
	errSetDesiredXR   = "cannot set the desired composite resource"
	errSetDesiredMRs  = "cannot set the desired composed resources"
)

// Function composes an egress proxy.
type Function struct {
	fnv1.UnimplementedFunctionRunnerServiceServer

	log logging.Logger
}

// NewFunction returns a Function that logs to the supplied logger.
func NewFunction(log logging.Logger) *Function {
	return &Function{log: log}
}

// RunFunction composes the managed resource of the input's backend for the
// XR, and returns the XR's status and connection details from the observed
// managed resource. Input it cannot honour is a fatal result; Crossplane then
// leaves what is composed as it is.
func (f *Function) RunFunction(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	rsp := response.To(req, response.DefaultTTL)

	in := &v1alpha1.Input{}
	if err := request.GetInput(req, in); err != nil {
		response.Fatal(rsp, errors.Wrap(err, errGetInput))
		return rsp, nil
	}
	b, err := backendFor(in.Backend)
	if err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}
	oxr, err := request.GetObservedCompositeResource(req)
	if err != nil {
		response.Fatal(rsp, errors.Wrap(err, errGetObservedXR))
		return rsp, nil
	}
	log := f.log.WithValues("xr", oxr.Resource.GetName(), "backend", in.Backend)

	p, err := proxyFrom(oxr.Resource)
	if err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}
	mr, warnings, err := b.compose(in, p)
	if err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}
	oc, err := observed(req, b)
	if err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}
	if err := setDesired(req, rsp, in, b, &resource.DesiredComposed{Resource: mr, Ready: readiness(oc)}, oc); err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}

	warnings = append(ignoredSections(in), warnings...)
	for _, w := range append(warnings, syncWarnings(oc)...) {
		response.Warning(rsp, errors.New(w)).TargetCompositeAndClaim()
	}
	log.Debug("Composed egress proxy", "namespace", p.namespace, "ready", readiness(oc), "warnings", len(warnings))
	return rsp, nil
}

// observed returns the backend's observed managed resource, or nil before
// Crossplane has created it.
func observed(req *fnv1.RunFunctionRequest, b backend) (*resource.ObservedComposed, error) {
	ocs, err := request.GetObservedComposedResources(req)
	if err != nil {
		return nil, errors.Wrap(err, errGetObservedMRs)
	}
	oc, ok := ocs[b.resource]
	if !ok {
		return nil, nil
	}
	return &oc, nil
}

// setDesired adds the managed resource to the desired composed resources and
// the XR's status and connection details to the desired XR, keeping what
// earlier pipeline steps desired.
func setDesired(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, in *v1alpha1.Input, b backend, mr *resource.DesiredComposed, oc *resource.ObservedComposed) error {
	dcs, err := request.GetDesiredComposedResources(req)
	if err != nil {
		return errors.Wrap(err, errGetDesiredMRs)
	}
	dcs[b.resource] = mr
	if err := response.SetDesiredComposedResources(rsp, dcs); err != nil {
		return errors.Wrap(err, errSetDesiredMRs)
	}

	dxr, err := request.GetDesiredCompositeResource(req)
	if err != nil {
		return errors.Wrap(err, errGetDesiredXR)
	}
	o, err := observation(oc)
	if err != nil {
		return err
	}
	if err := setStatus(dxr.Resource, in.Backend, o); err != nil {
		return err
	}
	dxr.ConnectionDetails = connectionDetails(dxr.ConnectionDetails, oc)
	return errors.Wrap(response.SetDesiredCompositeResource(rsp, dxr), errSetDesiredXR)
}
