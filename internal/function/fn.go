/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package function is function-egressproxy, the composition function that
// turns an egress proxy request (an EgressProxyClaim's XR or a namespaced
// EgressProxy) into exactly one managed resource of the backend its
// Composition names, and reports the proxy's endpoint, egress IP and
// connection details back. It serves both shapes of the API: a claim's
// cluster-scoped XR (apiextensions.crossplane.io/v1, LegacyCluster) and a
// namespaced XR (apiextensions.crossplane.io/v2, Namespaced).
package function

import (
	"context"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/crossplane/function-sdk-go/response"
	"k8s.io/apimachinery/pkg/runtime"

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

// msgBreaksGuardrails starts the warning for a claim that breaks the
// guardrails; the violations follow.
const msgBreaksGuardrails = "the claim breaks the guardrails of its Composition, so nothing new is composed for it: "

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
// leaves what is composed as it is. A claim that breaks the input's
// guardrails is not a fatal result, so that its owner sees why on the claim.
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

	ns, known, err := namespaceOf(req, rsp, oxr.Resource)
	if err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}
	if !known {
		// Crossplane fetches the claim and calls the function again.
		log.Debug("Requiring the claim")
		return rsp, nil
	}

	p, err := proxyFrom(oxr.Resource, ns)
	if err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}
	oc, err := observed(req, b)
	if err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}
	v, err := violations(in.Guardrails, p.spec)
	if err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}
	if len(v) > 0 {
		if err := keepObserved(req, rsp, in, oc); err != nil {
			response.Fatal(rsp, err)
			return rsp, nil
		}
		msg := strings.Join(v, "; ")
		response.ConditionFalse(rsp, ConditionWithinGuardrails, ReasonForbidden).WithMessage(msg).TargetCompositeAndClaim()
		response.Warning(rsp, errors.New(msgBreaksGuardrails+msg)).TargetCompositeAndClaim()
		log.Debug("Claim breaks the guardrails", "namespace", p.namespace, "violations", len(v))
		return rsp, nil
	}
	mr, forProvider, warnings, err := b.compose(in, p)
	if err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}
	// What the provider would refuse is refused here, with its message.
	pv, err := policyViolations(req, rsp, in, b, p.spec.parameters(), forProvider, p.namespace)
	if err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}
	if len(pv) > 0 {
		if err := keepObserved(req, rsp, in, oc); err != nil {
			response.Fatal(rsp, err)
			return rsp, nil
		}
		msg := strings.Join(pv, "; ")
		response.ConditionFalse(rsp, ConditionWithinGuardrails, ReasonForbidden).WithMessage(msg).TargetCompositeAndClaim()
		response.Warning(rsp, errors.New(msgBreaksPolicy+msg)).TargetCompositeAndClaim()
		log.Debug("Claim breaks the policy of its provider config", "namespace", p.namespace, "violations", len(pv))
		return rsp, nil
	}
	if err := setDesired(req, rsp, in, b, &resource.DesiredComposed{Resource: mr, Ready: readiness(oc)}, oc); err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}

	response.ConditionTrue(rsp, ConditionWithinGuardrails, ReasonAllowed).TargetCompositeAndClaim()
	warnings = append(ignoredSections(in), warnings...)
	for _, w := range append(warnings, syncWarnings(oc)...) {
		response.Warning(rsp, errors.New(w)).TargetCompositeAndClaim()
	}
	log.Debug("Composed egress proxy", "namespace", p.namespace, "ready", readiness(oc), "warnings", len(warnings))
	return rsp, nil
}

// observed returns the backend's observed managed resource, or nil before
// Crossplane has created it.
func observed(req *fnv1.RunFunctionRequest, b composer) (*resource.ObservedComposed, error) {
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
func setDesired(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, in *v1alpha1.Input, b composer, mr *resource.DesiredComposed, oc *resource.ObservedComposed) error {
	dcs, err := request.GetDesiredComposedResources(req)
	if err != nil {
		return errors.Wrap(err, errGetDesiredMRs)
	}
	dcs[b.resource] = mr
	if err := response.SetDesiredComposedResources(rsp, dcs); err != nil {
		return errors.Wrap(err, errSetDesiredMRs)
	}
	return setDesiredXR(req, rsp, in, oc, resource.ReadyUnspecified)
}

// keepObserved desires every observed composed resource as it is, and
// nothing else. Crossplane deletes a composed resource that is no longer
// desired, so a claim changed to break the guardrails would otherwise lose
// the proxy composed while it was within them; kept, that proxy goes on
// serving its last allowed configuration, and nothing new is composed.
func keepObserved(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, in *v1alpha1.Input, oc *resource.ObservedComposed) error {
	ocs, err := request.GetObservedComposedResources(req)
	if err != nil {
		return errors.Wrap(err, errGetObservedMRs)
	}
	dcs, err := request.GetDesiredComposedResources(req)
	if err != nil {
		return errors.Wrap(err, errGetDesiredMRs)
	}
	for name, o := range ocs {
		if _, ok := dcs[name]; ok {
			// An earlier pipeline step desires it.
			continue
		}
		// Only what composing sets: the observed object also holds
		// status and metadata others own, which must not be applied.
		k := composed.New()
		k.SetAPIVersion(o.Resource.GetAPIVersion())
		k.SetKind(o.Resource.GetKind())
		k.SetNamespace(o.Resource.GetNamespace())
		k.SetName(o.Resource.GetName())
		if spec, ok := o.Resource.Object["spec"]; ok {
			k.Object["spec"] = runtime.DeepCopyJSONValue(spec)
		}
		dcs[name] = &resource.DesiredComposed{Resource: k, Ready: readiness(&o)}
	}
	if err := response.SetDesiredComposedResources(rsp, dcs); err != nil {
		return errors.Wrap(err, errSetDesiredMRs)
	}
	// Without a proxy the claim is not ready, though nothing composed is
	// unready.
	ready := resource.ReadyUnspecified
	if oc == nil {
		ready = resource.ReadyFalse
	}
	return setDesiredXR(req, rsp, in, oc, ready)
}

// setDesiredXR sets the XR's status and connection details from the observed
// managed resource on the desired XR, keeping what earlier pipeline steps
// desired.
func setDesiredXR(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, in *v1alpha1.Input, oc *resource.ObservedComposed, ready resource.Ready) error {
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
	dxr.Ready = ready
	return errors.Wrap(response.SetDesiredCompositeResource(rsp, dxr), errSetDesiredXR)
}
