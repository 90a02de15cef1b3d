/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package crash

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/gcpfake"
	"github.com/egressproxy/provider-egressproxy/internal/gcpfake/proxyguest"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
)

const (
	gcpProject = "crash-project"
	gcpKey     = "gce-key"
)

var _ = registerTarget(cluster.BackendGCP, registration{start: gcpTarget})

// gcpTarget serves the GCE fake on loopback, in this process, behind a
// holder that can hold the response to an instances.insert, and points the
// gcp backend's ClusterProviderConfig at it.
func gcpTarget(t *testing.T, e *env) *target {
	t.Helper()
	ctx := t.Context()
	fake := gcpfake.NewTestServer(t, gcpfake.WithProjects(gcpProject), gcpfake.WithRequireAuth())
	// No VM runs here: stand in for every guest's serving report.
	go proxyguest.Run(ctx, fake, proxyguest.DefaultEvery)
	insert := func(r *http.Request) bool {
		ok, _ := path.Match("/compute/v1/projects/*/zones/*/instances", r.URL.Path)
		return ok && r.Method == http.MethodPost
	}
	list := func(r *http.Request) bool {
		ok, _ := path.Match("/compute/v1/projects/*/aggregated/instances", r.URL.Path)
		return ok && r.Method == http.MethodGet
	}
	// Create inserts the address and the firewall rule, then the
	// instance: holding the instance's insert leaves the first two.
	h := newHolder(fake, insert, insert, list)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	key, err := fake.NewServiceAccountKey("provider@" + gcpProject + ".iam.gserviceaccount.com")
	if err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: secretNamespace, Name: gcpKey},
		Data:       map[string][]byte{"credentials.json": key},
	}
	if err := e.c.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	pc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gcp.m.egressproxy.io/v1alpha1",
		"kind":       "ClusterProviderConfig",
		"metadata":   map[string]any{"name": configName},
		"spec": map[string]any{
			"projectID": gcpProject,
			"endpoint":  srv.URL,
			"credentials": map[string]any{"source": "Secret", "secretRef": map[string]any{
				"name": gcpKey, "namespace": secretNamespace, "key": "credentials.json",
			}},
		},
	}}
	if err := cluster.Apply(ctx, e.c.Client, pc); err != nil {
		t.Fatal(err)
	}
	return &target{
		name:       "gcp",
		apiVersion: "gcp.m.egressproxy.io/v1alpha1",
		kind:       "GCPProxy",
		namespace:  "crash-gcp",
		forProvider: func() map[string]any {
			return map[string]any{
				"zone":               "us-central1-a",
				"allowedClientCIDRs": []any{"10.0.0.0/8"},
			}
		},
		hold: h.trap,
		instances: func(context.Context) ([]instance, error) {
			var out []instance
			for _, in := range fake.Instances() {
				out = append(out, instance{
					name:    in.GetName(),
					owner:   in.GetLabels()[backend.CloudLabelKeys.OwnerUID],
					version: strconv.FormatUint(in.GetId(), 10),
				})
			}
			return out, nil
		},
		leftovers: func(context.Context) ([]string, error) {
			// Only the suite uses this fake: whatever is left is a leak.
			var out []string
			for _, in := range fake.Instances() {
				out = append(out, "instance "+in.GetName())
			}
			for _, a := range fake.Addresses() {
				out = append(out, "address "+a.GetName())
			}
			for _, f := range fake.Firewalls() {
				out = append(out, "firewall "+f.GetName())
			}
			return out, nil
		},
	}
}
