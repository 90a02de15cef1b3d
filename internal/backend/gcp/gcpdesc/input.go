/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcpdesc

// The section's deepcopy methods, which the input's call (see generate.go).
//go:generate go tool controller-gen object:headerFile=../../../../hack/boilerplate.go.txt paths=.

// Defaults are the gcp section of the function input: the platform
// defaults of a GCPProxy. Its field in the input is named like the backend.
type Defaults struct {
	// Zone of the proxy VMs, such as europe-west1-b. Required: the
	// function returns a fatal result without it.
	// +kubebuilder:validation:MinLength=1
	Zone string `json:"zone"`

	// Image of the boot disk. The managed resource's default when absent.
	// +optional
	Image *string `json:"image,omitempty"`

	// Network of the VMs. The managed resource's default when absent.
	// +optional
	Network *string `json:"network,omitempty"`

	// Subnetwork of the VMs, in the zone's region.
	// +optional
	Subnetwork *string `json:"subnetwork,omitempty"`

	// NetworkTags added to the VMs.
	// +optional
	NetworkTags []string `json:"networkTags,omitempty"`

	// MachineTypes per size. Defaults: small e2-small, medium e2-medium,
	// large e2-standard-2.
	// +optional
	MachineTypes *MachineTypesPerSize `json:"machineTypes,omitempty"`
}

// MachineTypesPerSize maps each size onto a Compute Engine machine type.
type MachineTypesPerSize struct {
	// +optional
	Small string `json:"small,omitempty"`
	// +optional
	Medium string `json:"medium,omitempty"`
	// +optional
	Large string `json:"large,omitempty"`
}
