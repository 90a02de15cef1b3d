/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package policy checks a proxy's parameters against the platform's rules
// common to every backend (apis/common/v1alpha1 ProxyPolicy). It is the one
// implementation of those rules: the provider applies a provider config's
// policy to every managed resource with it, and the composition function
// applies its guardrails with it, so a claim is refused with the message
// the provider would give.
package policy
