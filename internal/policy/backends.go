/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package policy

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// Each backend's policy check is its descriptor's (backend.Description's
// Policy, listed by package registry): a new backend brings its own, and
// the provider's connector and the composition function call the one of
// the backend at hand. What they share is here.

const errFmtBackendMismatch = "cannot apply the policy of a %T to parameters of type %T"

// Mismatch is the error of a backend's policy check given a config or
// parameters that are not its backend's.
func Mismatch(cfg, forProvider any) error {
	return errors.Errorf(errFmtBackendMismatch, cfg, forProvider)
}

// ParamsOf returns forProvider, a P or a *P, as a P, or Mismatch.
func ParamsOf[P any](cfg, forProvider any) (P, error) {
	switch p := forProvider.(type) {
	case P:
		return p, nil
	case *P:
		if p != nil {
			return *p, nil
		}
	}
	var zero P
	return zero, Mismatch(cfg, forProvider)
}
