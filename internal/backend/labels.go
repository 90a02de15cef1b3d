/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package backend

import (
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/types"
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
// label-safe on every backend: UIDs are lower-case hex and dashes, the
// provider instance is canonical (ValidateInstance) and written as is, and
// names go through LabelValue. Only the UID and the provider instance
// identify the owner; the namespace and name are for people and may be
// shortened.
func (o Ownership) Labels(keys LabelKeys) map[string]string {
	return map[string]string{
		keys.ManagedBy:        ManagedByValue,
		keys.OwnerUID:         string(o.Owner.UID),
		keys.ProviderInstance: o.ProviderInstance,
		keys.OwnerNamespace:   LabelValue(o.Owner.Namespace),
		keys.OwnerName:        LabelValue(o.Owner.Name),
	}
}

// maxLabelValue is the longest label value Kubernetes and GCE accept.
const maxLabelValue = 63

const errFmtInstance = "provider instance %q is not a canonical label value (lower-case letters, digits, '-' and '_', at most 63 characters, starting and ending with a letter or digit), such as %q"

// ValidateInstance returns an error unless s is a provider instance that
// label sanitising leaves unchanged. Ownership compares the instance
// exactly, so a value that LabelValue would fold (Prod-EU and prod.eu both
// become prod-eu) or cut would let two installations pass for one.
func ValidateInstance(s string) error {
	if s == "" || LabelValue(s) != s {
		return errors.Errorf(errFmtInstance, s, LabelValue(s))
	}
	return nil
}

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

// OwnedBy reports whether labels say the object belongs to want: managed
// by this provider, the same owner UID and exactly the same provider
// instance. Create uses it before adopting an object that already exists:
// adopting another resource's instance would hand one team's proxy to
// another. An empty instance owns nothing, so an unlabelled part never
// matches.
func OwnedBy(keys LabelKeys, l map[string]string, want Ownership) bool {
	got, ok := OwnershipFromLabels(keys, l)
	return ok && want.ProviderInstance != "" && got.Owner.UID == want.Owner.UID && got.ProviderInstance == want.ProviderInstance
}

// A Verdict is what the garbage collector decides about one listed instance.
// The values are those of the result label of the GC metric.
type Verdict string

// Verdicts.
const (
	// VerdictCollect: ours, orphaned and old enough; delete it.
	VerdictCollect Verdict = "deleted"
	// VerdictForeign: not marked as this provider instance's (another
	// installation's, or without ownership); never touched.
	VerdictForeign Verdict = "skipped_foreign"
	// VerdictYoung: younger than the minimum age, or of unknown age.
	VerdictYoung Verdict = "skipped_young"
	// VerdictLive: its managed resource exists.
	VerdictLive Verdict = "skipped_live"
)

// Judge decides whether the garbage collector may delete an instance found
// by List. Only an instance whose ownership names an owner UID and exactly
// providerInstance, that has a creation time older than minAge, and whose
// owner is gone, is collected. Parts without an ownership record (volumes
// whose domain is gone) are never collected: nothing tells which
// installation made them, and a host may be shared. A zero creation time
// is never collected either: a backend that failed to read it back must not
// lose a fresh instance.
func Judge(in Instance, providerInstance string, ownerExists func(types.UID) bool, minAge time.Duration, now time.Time) Verdict {
	switch {
	case providerInstance == "" || in.Ownership.Owner.UID == "" || in.Ownership.ProviderInstance != providerInstance:
		return VerdictForeign
	case in.CreatedAt.IsZero() || now.Sub(in.CreatedAt) < minAge:
		return VerdictYoung
	case ownerExists(in.Ownership.Owner.UID):
		return VerdictLive
	}
	return VerdictCollect
}

// Collectable reports whether Judge allows the garbage collector to delete
// in.
func Collectable(in Instance, providerInstance string, ownerExists func(types.UID) bool, minAge time.Duration, now time.Time) bool {
	return Judge(in, providerInstance, ownerExists, minAge, now) == VerdictCollect
}
