/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package backend

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
)

// ManagedByValue is the value of the managed-by label on everything the
// provider creates.
const ManagedByValue = "provider-egressproxy"

// LabelKeys are the keys of the ownership labels in one backend's syntax.
type LabelKeys struct {
	// ManagedBy marks an object as created by this provider.
	ManagedBy string
	// OwnerUID is the UID of the managed resource that owns the object.
	OwnerUID string
	// ProviderInstance tells apart provider deployments that share a
	// backend, so one never collects the other's instances.
	ProviderInstance string
	// OwnerNamespace and OwnerName are for people reading the backend.
	OwnerNamespace string
	OwnerName      string
}

// KubernetesLabelKeys are label keys for Kubernetes objects.
var KubernetesLabelKeys = LabelKeys{
	ManagedBy:        "egressproxy.io/managed-by",
	OwnerUID:         "egressproxy.io/owner-uid",
	ProviderInstance: "egressproxy.io/provider-instance",
	OwnerNamespace:   "egressproxy.io/owner-namespace",
	OwnerName:        "egressproxy.io/owner-name",
}

// CloudLabelKeys are label keys for backends whose keys allow only
// lower-case letters, digits, dashes and underscores (GCE labels, libvirt
// metadata). The egressproxy- prefix is reserved at admission.
var CloudLabelKeys = LabelKeys{
	ManagedBy:        "egressproxy-managed-by",
	OwnerUID:         "egressproxy-owner-uid",
	ProviderInstance: "egressproxy-provider-instance",
	OwnerNamespace:   "egressproxy-owner-namespace",
	OwnerName:        "egressproxy-owner-name",
}

// Ownership is what the ownership labels of an instance say.
type Ownership struct {
	// Owner of the instance.
	Owner Owner
	// ProviderInstance that created the instance.
	ProviderInstance string
}

// Labels returns the ownership labels in the syntax of keys. Values are
// label-safe on every backend: UIDs are lower-case hex and dashes, and names
// go through LabelValue. Only the UID identifies the owner; the namespace and
// name are for people and may be shortened.
func (o Ownership) Labels(keys LabelKeys) map[string]string {
	return map[string]string{
		keys.ManagedBy:        ManagedByValue,
		keys.OwnerUID:         string(o.Owner.UID),
		keys.ProviderInstance: LabelValue(o.ProviderInstance),
		keys.OwnerNamespace:   LabelValue(o.Owner.Namespace),
		keys.OwnerName:        LabelValue(o.Owner.Name),
	}
}

// maxLabelValue is the longest label value Kubernetes and GCE accept.
const maxLabelValue = 63

// LabelValue makes s a label value valid on every backend: lower-case
// letters, digits, dashes and underscores (GCE allows no dots), at most 63
// characters, starting and ending with a letter or digit (Kubernetes).
// Composed resources get names longer than 63 characters, so names are
// shortened rather than refused.
func LabelValue(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
			b[i] = '-'
		}
	}
	if len(b) > maxLabelValue {
		b = b[:maxLabelValue]
	}
	return strings.Trim(string(b), "-_")
}

// OwnershipFromLabels reads ownership back from labels. ok is false when the
// labels do not mark the object as ours.
func OwnershipFromLabels(keys LabelKeys, l map[string]string) (Ownership, bool) {
	if l[keys.ManagedBy] != ManagedByValue || l[keys.OwnerUID] == "" {
		return Ownership{}, false
	}
	return Ownership{
		Owner: Owner{
			UID:       types.UID(l[keys.OwnerUID]),
			Namespace: l[keys.OwnerNamespace],
			Name:      l[keys.OwnerName],
		},
		ProviderInstance: l[keys.ProviderInstance],
	}, true
}

// OwnedBy reports whether labels say the object belongs to want. Create uses
// it before adopting an object that already exists: adopting another
// resource's instance would hand one team's proxy to another.
func OwnedBy(keys LabelKeys, l map[string]string, want Ownership) bool {
	got, ok := OwnershipFromLabels(keys, l)
	return ok && got.Owner.UID == want.Owner.UID && got.ProviderInstance == LabelValue(want.ProviderInstance)
}

// Collectable reports whether the garbage collector may delete an instance
// found by List: it is ours, its owner is gone, and it is older than minAge.
// A zero creation time is never collectable: a backend that failed to read
// it back must not lose a fresh instance.
//
// Parts left without any ownership record (a backend reports them with an
// empty owner UID and state Terminated, such as volumes whose domain is gone)
// are collectable on age alone: nothing else can tell whose they were.
func Collectable(in Instance, providerInstance string, ownerExists func(types.UID) bool, minAge time.Duration, now time.Time) bool {
	if in.CreatedAt.IsZero() || now.Sub(in.CreatedAt) < minAge {
		return false
	}
	if in.Ownership.Owner.UID == "" {
		return in.State == commonv1alpha1.StateTerminated
	}
	if in.Ownership.ProviderInstance != LabelValue(providerInstance) {
		return false
	}
	if now.Sub(in.CreatedAt) < minAge {
		return false
	}
	return !ownerExists(in.Ownership.Owner.UID)
}
