/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1

// Defaults of GCPProxyParameters, as the API server defaults them (the
// +kubebuilder:default markers), for code that reads parameters no API
// server defaulted: the backend, and the policy rules the composition
// function applies to what it is about to compose.
const (
	DefaultMachineType = "e2-small"
	DefaultImage       = "projects/debian-cloud/global/images/family/debian-12"
	DefaultNetwork     = "default"
)
