/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package v1alpha1 holds the types every egress proxy managed resource shares:
// what the proxy allows (ProxyParameters), what the backend reports back
// (ProxyObservation), and the shapes of credential references.
// +kubebuilder:object:generate=true
package v1alpha1
