/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package function

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/egressproxy/provider-egressproxy/internal/function/input/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/policy"
)

// ConditionWithinGuardrails tells the claim's owner whether the claim stays
// within the guardrails of its Composition's function input.
const ConditionWithinGuardrails = "WithinGuardrails"

// Reasons of the WithinGuardrails condition.
const (
	ReasonAllowed   = "Allowed"
	ReasonForbidden = "Forbidden"
)

const errGuardrails = "the function input's guardrails cannot be applied"

// guardrailPaths name a claim's fields and the input's rules in messages.
var guardrailPaths = policy.Paths{Proxy: "spec", Rules: "guardrails"}

// violations returns one message per part of the claim that breaks the
// guardrails, each naming the claim's field and the rule it broke: the
// messages the provider gives for a provider config's policy. A claim
// within them has none. Guardrails the function cannot read are an error.
func violations(g *v1alpha1.Guardrails, s proxySpec) ([]string, error) {
	if g == nil {
		// No guardrails still keeps private destinations out, as the
		// provider does without a policy.
		g = &v1alpha1.Guardrails{}
	}
	v, err := policy.Violations(g.ProxyRules, s.parameters(), guardrailPaths)
	return v, errors.Wrap(err, errGuardrails)
}
