/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package admission

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

// gcpAllowedSAs returns n distinct service account e-mails.
func gcpAllowedSAs(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = fmt.Sprintf("proxy-%d@my-project-123.iam.gserviceaccount.com", i)
	}
	return out
}

// gcpNamespacedConfig is gcpConfig as a namespaced ProviderConfig.
func gcpNamespacedConfig() obj {
	return set(set(gcpConfig(), "kind", "ProviderConfig"), "metadata.namespace", ns)
}

// TestGCPAllowedServiceAccounts checks spec.allowedServiceAccounts of both
// GCP config kinds: the list the backend checks serviceAccountEmail against.
func TestGCPAllowedServiceAccounts(t *testing.T) {
	e := kube.Shared(t)
	e.CreateNamespace(t, ns)
	const field = "spec.allowedServiceAccounts"

	invalid := map[string]struct {
		obj obj
		// msg must appear in the error, with the field.
		msg string
	}{
		"NotAnEmail":    {set(gcpConfig(), field, []any{"proxy"}), "spec.allowedServiceAccounts must hold service account e-mails"},
		"UpperCase":     {set(gcpNamespacedConfig(), field, []any{"Proxy@my-project-123.iam.gserviceaccount.com"}), "spec.allowedServiceAccounts must hold service account e-mails"},
		"Wildcard":      {set(gcpConfig(), field, []any{"*@my-project-123.iam.gserviceaccount.com"}), "spec.allowedServiceAccounts must hold service account e-mails"},
		"Newline":       {set(gcpConfig(), field, []any{"a@b.com\nc@d.com"}), "spec.allowedServiceAccounts must hold service account e-mails"},
		"TooLong":       {set(gcpConfig(), field, []any{strings.Repeat("a", 250) + "@b.co"}), "254"},
		"TooMany":       {set(gcpNamespacedConfig(), field, gcpAllowedSAs(65)), "must have at most 64 items"},
		"Duplicate":     {set(gcpConfig(), field, []any{"a@b.com", "a@b.com"}), "Duplicate value"},
		"NotAList":      {set(gcpConfig(), field, "a@b.com"), "must be of type array"},
		"EntryNotAText": {set(gcpConfig(), field, []any{int64(1)}), "must be of type string"},
	}
	for name, tc := range invalid {
		t.Run(name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: tc.obj}
			u.SetName("gcp-sa-" + strings.ToLower(name))
			err := e.Client.Create(t.Context(), u, client.FieldValidation("Strict"))
			if err == nil {
				t.Fatalf("%s was accepted; want it rejected naming %q", name, field)
			}
			if msg := err.Error(); !strings.Contains(msg, field) || !strings.Contains(msg, tc.msg) {
				t.Errorf("%s: error does not name %q with %q:\n%s", name, field, tc.msg, msg)
			}
		})
	}

	valid := map[string]obj{
		"ClusterProviderConfig": set(gcpConfig(), field, []any{"proxy@my-project-123.iam.gserviceaccount.com", "123456789-compute@developer.gserviceaccount.com"}),
		"ProviderConfig":        set(gcpNamespacedConfig(), field, gcpAllowedSAs(64)),
		"Empty":                 set(gcpConfig(), field, []any{}),
	}
	for name, o := range valid {
		t.Run("Valid"+name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: o}
			u.SetName("gcp-sa-valid-" + strings.ToLower(name))
			if err := e.Client.Create(t.Context(), u, client.FieldValidation("Strict")); err != nil {
				t.Fatalf("%s was rejected: %v", name, err)
			}
			t.Cleanup(func() { _ = e.Client.Delete(t.Context(), u) })
		})
	}
}
