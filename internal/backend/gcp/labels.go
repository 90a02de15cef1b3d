/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// Firewall rules have no labels: their description carries the ownership,
// as "... (owner-uid=<uid> provider-instance=<name>)".
// ownershipLabelPrefix starts every key of backend.CloudLabelKeys.
const ownershipLabelPrefix = "egressproxy-"

const (
	descOwnerUID         = "owner-uid="
	descProviderInstance = "provider-instance="
)

// cloudOwnership is o as it reads back from GCE labels.
func cloudOwnership(o backend.Ownership) backend.Ownership {
	return backend.Ownership{
		Owner: backend.Owner{
			UID:       types.UID(backend.LabelValue(string(o.Owner.UID))),
			Namespace: backend.LabelValue(o.Owner.Namespace),
			Name:      backend.LabelValue(o.Owner.Name),
		},
		ProviderInstance: backend.LabelValue(o.ProviderInstance),
	}
}

// ownershipLabels returns the ownership labels of o in GCE syntax.
func ownershipLabels(o backend.Ownership) map[string]string {
	return cloudOwnership(o).Labels(backend.CloudLabelKeys)
}

// ownedBy reports whether labels say the resource belongs to o.
func ownedBy(labels map[string]string, o backend.Ownership) bool {
	return backend.OwnedBy(backend.CloudLabelKeys, labels, cloudOwnership(o))
}

// hasOwnershipLabels reports whether labels hold any ownership label, of
// any owner or provider instance. The prefix is reserved at admission, so
// only the provider writes such labels.
func hasOwnershipLabels(labels map[string]string) bool {
	for k := range labels {
		if strings.HasPrefix(k, ownershipLabelPrefix) {
			return true
		}
	}
	return false
}

// instanceLabels are the user's labels plus the ownership labels, which win.
func instanceLabels(user map[string]string, o backend.Ownership) map[string]string {
	out := make(map[string]string, len(user)+5)
	for k, v := range user {
		out[k] = v
	}
	for k, v := range ownershipLabels(o) {
		out[k] = v
	}
	return out
}

// labelsToSet are the labels instances.setLabels writes, which replace
// them all: want (the user's and the ownership labels, see
// instanceLabels) and the labels Google added to the running VM, which are
// not ours to remove.
func labelsToSet(want, got map[string]string) map[string]string {
	out := make(map[string]string, len(want)+len(got))
	for k, v := range got {
		if strings.HasPrefix(k, googleLabelPrefix) {
			out[k] = v
		}
	}
	for k, v := range want {
		out[k] = v
	}
	return out
}

// firewallDescription says who a firewall rule belongs to.
func firewallDescription(o backend.Ownership) string {
	c := cloudOwnership(o)
	return fmt.Sprintf("Admits the allowed clients of egress proxy %s/%s. Managed by %s (%s%s %s%s)",
		o.Owner.Namespace, o.Owner.Name, backend.ManagedByValue, descOwnerUID, c.Owner.UID, descProviderInstance, c.ProviderInstance)
}

// firewallOwnedBy reports whether a firewall rule's description says it
// belongs to o.
func firewallOwnedBy(description string, o backend.Ownership) bool {
	var uid, pi string
	for _, f := range strings.Fields(strings.Trim(description[strings.LastIndex(description, "(")+1:], "()")) {
		switch {
		case strings.HasPrefix(f, descOwnerUID):
			uid = strings.TrimPrefix(f, descOwnerUID)
		case strings.HasPrefix(f, descProviderInstance):
			pi = strings.TrimPrefix(f, descProviderInstance)
		}
	}
	c := cloudOwnership(o)
	return uid != "" && uid == string(c.Owner.UID) && pi == c.ProviderInstance
}
