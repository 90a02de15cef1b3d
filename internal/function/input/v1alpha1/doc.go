/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package v1alpha1 contains the input of function-egressproxy: which backend
// a Composition composes and the platform team's defaults for it.
//
// The input is never stored by an API server: Crossplane passes it to the
// function verbatim from the Composition. Its CRD in package/function/input
// documents and validates it (crossplane beta validate), but CRD defaults are
// never applied, so the function applies its own.
// +kubebuilder:object:generate=true
// +groupName=egressproxy.fn.egressproxy.io
// +versionName=v1alpha1
package v1alpha1
