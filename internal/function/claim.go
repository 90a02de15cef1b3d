/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package function

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource/composite"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// KindClaim is the kind of the claim the XRD offers (package/configuration).
const KindClaim = "EgressProxyClaim"

// requiredClaim names the function's requirement for the XR's claim.
const requiredClaim = "claim"

const (
	errGetClaimRef      = "cannot read spec.claimRef of the composite resource"
	errGetClaim         = "cannot read the claim the composite resource references"
	errFmtNoClaimRef    = "%s %s has no spec.claimRef: it must be created through an %s, whose namespace the proxy is composed in"
	errFmtBadClaimRef   = "%s %s has a spec.claimRef to %s %s/%s, not to an %s of its own API group"
	errFmtBadClaimNS    = "%s %s has a spec.claimRef to namespace %q, which is not a namespace name"
	errFmtNoClaim       = "%s %s references claim %s/%s in spec.claimRef, which does not exist: nothing is composed for it"
	errFmtClaimNotMine  = "%s %s references claim %s/%s in spec.claimRef, but that claim's spec.resourceRef does not name this %s: nothing is composed for it"
	errFmtClaimResource = "cannot read spec.resourceRef of claim %s/%s"
)

// namespaceOf returns the namespace the proxy is composed in, and false
// while the function waits for Crossplane to fetch the XR's claim.
//
// A namespaced XR (Crossplane v2) has no claim: its own metadata.namespace,
// which the API server sets from where the XR was created, is the namespace,
// and Crossplane composes a namespaced XR's resources only there. A
// cluster-scoped XR has no namespace of its own, so the namespace is that of
// the claim proven to be the XR's (see claimNamespace). Neither comes from a
// label or a field the XR's author writes.
func namespaceOf(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, xr *composite.Unstructured) (string, bool, error) {
	if ns := xr.GetNamespace(); ns != "" {
		return ns, true, nil
	}
	ref, err := claimOf(xr)
	if err != nil {
		return "", false, err
	}
	ref.require(rsp)
	return claimNamespace(req, xr, ref)
}

// A claimRef is the XR's spec.claimRef, which Crossplane sets on an XR it
// creates for a claim.
type claimRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace"`
}

// claimOf returns the XR's claimRef if it can reference an EgressProxyClaim.
// It does not prove the claim exists or is the XR's: anyone who may
// create an XR may write any claimRef (or claim label) on it.
func claimOf(xr *composite.Unstructured) (claimRef, error) {
	ref := claimRef{}
	err := xr.GetValueInto("spec.claimRef", &ref)
	if fieldpath.IsNotFound(err) || (err == nil && ref.Name == "" && ref.Namespace == "") {
		return ref, errors.Errorf(errFmtNoClaimRef, xr.GetKind(), xr.GetName(), KindClaim)
	}
	if err != nil {
		return ref, errors.Wrap(err, errGetClaimRef)
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != xr.GetObjectKind().GroupVersionKind().Group || ref.Kind != KindClaim || ref.Name == "" {
		return ref, errors.Errorf(errFmtBadClaimRef, xr.GetKind(), xr.GetName(), ref.Kind, ref.Namespace, ref.Name, KindClaim)
	}
	if len(validation.IsDNS1123Label(ref.Namespace)) > 0 {
		return ref, errors.Errorf(errFmtBadClaimNS, xr.GetKind(), xr.GetName(), ref.Namespace)
	}
	return ref, nil
}

// require asks Crossplane for the claim the XR references, on every call.
func (ref claimRef) require(rsp *fnv1.RunFunctionResponse) {
	require(rsp, requiredClaim, &fnv1.ResourceSelector{
		ApiVersion: ref.APIVersion,
		Kind:       ref.Kind,
		Match:      &fnv1.ResourceSelector_MatchName{MatchName: ref.Name},
		Namespace:  &ref.Namespace,
	})
}

// claimNamespace returns the namespace of the XR's claim once it is proven
// to be the XR's: the claim the XR's claimRef names exists and its
// resourceRef names the XR. Crossplane sets the claim's resourceRef before
// it creates the XR, and only someone who may write claims in a namespace
// can set it, so an XR whose claim label or claimRef is forged gets no
// namespace and nothing is composed for it. The bool is false until
// Crossplane has fetched the claim.
func claimNamespace(req *fnv1.RunFunctionRequest, xr *composite.Unstructured, ref claimRef) (string, bool, error) {
	claims, fetched, err := request.GetRequiredResource(req, requiredClaim)
	if err != nil {
		return "", fetched, errors.Wrap(err, errGetClaim)
	}
	if !fetched {
		return "", false, nil
	}
	if len(claims) != 1 {
		return "", true, errors.Errorf(errFmtNoClaim, xr.GetKind(), xr.GetName(), ref.Namespace, ref.Name)
	}
	c := claims[0].Resource
	if c.GetKind() != ref.Kind || c.GetNamespace() != ref.Namespace || c.GetName() != ref.Name {
		return "", true, errors.Errorf(errFmtNoClaim, xr.GetKind(), xr.GetName(), ref.Namespace, ref.Name)
	}
	rr := struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Name       string `json:"name"`
	}{}
	err = fieldpath.Pave(c.Object).GetValueInto("spec.resourceRef", &rr)
	if err != nil && !fieldpath.IsNotFound(err) {
		return "", true, errors.Wrapf(err, errFmtClaimResource, ref.Namespace, ref.Name)
	}
	// The group, not the version: the claim may reference the XR at
	// another version of the XRD than the one the XR is observed at.
	gv, _ := schema.ParseGroupVersion(rr.APIVersion)
	if rr.Kind != xr.GetKind() || rr.Name != xr.GetName() || gv.Group != xr.GetObjectKind().GroupVersionKind().Group {
		return "", true, errors.Errorf(errFmtClaimNotMine, xr.GetKind(), xr.GetName(), ref.Namespace, ref.Name, xr.GetKind())
	}
	return c.GetNamespace(), true, nil
}
