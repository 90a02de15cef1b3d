/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package function

import (
	"fmt"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"k8s.io/apimachinery/pkg/runtime"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
	"github.com/egressproxy/provider-egressproxy/internal/function/input/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/policy"
)

// requiredConfig names the function's requirement for the provider config
// the composed managed resource will use.
const requiredConfig = "provider-config"

// The provider config a managed resource uses when the input names none,
// as the managed resource's API defaults it.
const (
	defaultConfigKind = backend.KindClusterProviderConfig
	defaultConfigName = "default"
)

// msgBreaksPolicy starts the warning for a claim whose managed resource
// the policy of its provider config would refuse; the violations follow.
const msgBreaksPolicy = "the claim breaks the policy of the provider config its Composition uses, so nothing new is composed for it: "

const (
	errGetConfig      = "cannot read the provider config the function required"
	errFmtReadConfig  = "cannot read %s %q as the provider config of the %s backend"
	errFmtConfigRules = "the policy of %s %q cannot be applied"
	errFmtNoCheck     = "the %s backend has no policy check"
)

// configScheme knows the provider config kinds of every backend.
var configScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := registry.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// policyViolations asks Crossplane for the provider config the managed
// resource will use, and returns every rule of that config's spec.policy
// the resource's spec.forProvider breaks, common and per-backend, with the
// message the provider would give (package policy, the one implementation
// of the rules). params is the resource's common proxy parameters,
// forProvider its backend parameters, ns its namespace. There are none
// until Crossplane has fetched the config (it then calls the function
// again), nor when the config does not exist: the managed resource says
// so. The config's namespaceSelector is the provider's alone to check: the
// function cannot read namespaces.
func policyViolations(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, in *v1alpha1.Input, b composer, params commonv1alpha1.ProxyParameters, forProvider any, ns string) ([]string, error) {
	kind, name := defaultConfigKind, defaultConfigName
	if r := in.ProviderConfigRef; r != nil {
		kind, name = r.Kind, r.Name
	}
	gvk := b.gvk.GroupVersion().WithKind(kind)
	sel := &fnv1.ResourceSelector{
		ApiVersion: gvk.GroupVersion().String(),
		Kind:       kind,
		Match:      &fnv1.ResourceSelector_MatchName{MatchName: name},
	}
	if kind == backend.KindProviderConfig {
		sel.Namespace = &ns
	}
	require(rsp, requiredConfig, sel)

	cfgs, fetched, err := request.GetRequiredResource(req, requiredConfig)
	if err != nil {
		return nil, errors.Wrap(err, errGetConfig)
	}
	if !fetched || len(cfgs) != 1 {
		return nil, nil
	}
	obj, err := configScheme.New(gvk)
	if err != nil {
		return nil, errors.Wrapf(err, errFmtReadConfig, kind, name, in.Backend)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(cfgs[0].Resource.Object, obj); err != nil {
		return nil, errors.Wrapf(err, errFmtReadConfig, kind, name, in.Backend)
	}
	h, ok := obj.(interface {
		GetProxyPolicy() *commonv1alpha1.ProxyPolicy
	})
	if !ok {
		return nil, errors.Errorf(errFmtReadConfig, kind, name, in.Backend)
	}
	// As the provider names the rules (package proxy's policyPaths).
	at := policy.Paths{Proxy: "spec.forProvider", Rules: fmt.Sprintf("%s %q spec.policy", kind, name)}
	v, err := policy.Violations(h.GetProxyPolicy().ProxyRules, params, at)
	if err != nil {
		return nil, errors.Wrapf(err, errFmtConfigRules, kind, name)
	}
	if b.policy == nil {
		return nil, errors.Errorf(errFmtNoCheck, in.Backend)
	}
	bv, err := b.policy(obj, forProvider, ns)
	if err != nil {
		return nil, errors.Wrapf(err, errFmtConfigRules, kind, name)
	}
	return append(v, bv...), nil
}

// require adds a requirement to rsp. The function asks on every call that
// gets this far, so that its requirements stay the same once they are
// satisfied, which is how Crossplane knows to stop calling it again.
func require(rsp *fnv1.RunFunctionResponse, name string, sel *fnv1.ResourceSelector) {
	if rsp.Requirements == nil {
		rsp.Requirements = &fnv1.Requirements{}
	}
	if rsp.Requirements.Resources == nil {
		rsp.Requirements.Resources = map[string]*fnv1.ResourceSelector{}
	}
	rsp.Requirements.Resources[name] = sel
}
