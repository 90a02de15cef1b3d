/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package admission

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

// TestDataPlanePorts checks the port lists the squid renderer gets: an empty
// list is refused with a message that names the field (it could not be
// stored as "none", the default would replace it), and a missing one takes
// the default the renderer's caller assumes.
func TestDataPlanePorts(t *testing.T) {
	e := kube.Shared(t)
	dns := e.Namespace(t, "dataplane")
	in := func(o obj) obj { return set(o, "metadata.namespace", dns) }

	rejected := map[string]struct {
		obj        obj
		field, msg string
	}{
		"ConnectPortsEmpty": {set(in(kubernetesProxy()), fp+"allowedConnectPorts", []any{}), fp + "allowedConnectPorts", "allowedConnectPorts must name at least one port"},
		"HTTPPortsEmpty":    {set(in(gcpProxy()), fp+"allowedHTTPPorts", []any{}), fp + "allowedHTTPPorts", "allowedHTTPPorts must name at least one port"},
		"HTTPPortZero":      {set(in(kvmProxy()), fp+"allowedHTTPPorts", []any{int64(80), int64(0)}), fp + "allowedHTTPPorts", "greater than or equal to 1"},
		"HTTPPortTooHigh":   {set(in(kubernetesProxy()), fp+"allowedHTTPPorts", []any{int64(65536)}), fp + "allowedHTTPPorts", "less than or equal to 65535"},
		"HTTPPortDuplicate": {set(in(gcpProxy()), fp+"allowedHTTPPorts", []any{int64(80), int64(80)}), fp + "allowedHTTPPorts", "Duplicate"},
	}
	for name, tc := range rejected {
		t.Run(name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: tc.obj}
			u.SetName(strings.ToLower(name))
			err := e.Client.Create(t.Context(), u, client.FieldValidation("Strict"))
			if err == nil {
				t.Fatalf("%s was accepted; want it rejected naming %q", name, tc.field)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.field) || !strings.Contains(msg, tc.msg) {
				t.Errorf("%s: error does not name %q with %q:\n%s", name, tc.field, tc.msg, msg)
			}
		})
	}

	defaulted := map[string]struct {
		obj                   obj
		wantConnect, wantHTTP []any
	}{
		"KubernetesDefaults": {in(kubernetesProxy()), []any{int64(443)}, []any{int64(80), int64(443)}},
		"GCPDefaults":        {in(gcpProxy()), []any{int64(443)}, []any{int64(80), int64(443)}},
		"KVMDefaults":        {in(kvmProxy()), []any{int64(443)}, []any{int64(80), int64(443)}},
		"Explicit":           {set(set(in(kubernetesProxy()), fp+"allowedConnectPorts", []any{int64(8443)}), fp+"allowedHTTPPorts", []any{int64(8080)}), []any{int64(8443)}, []any{int64(8080)}},
	}
	for name, tc := range defaulted {
		t.Run(name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: tc.obj}
			u.SetName(strings.ToLower(name))
			if err := e.Client.Create(t.Context(), u, client.FieldValidation("Strict")); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			connect, _, _ := unstructured.NestedSlice(u.Object, "spec", "forProvider", "allowedConnectPorts")
			http, _, _ := unstructured.NestedSlice(u.Object, "spec", "forProvider", "allowedHTTPPorts")
			got := obj{"connect": connect, "http": http}
			want := obj{"connect": tc.wantConnect, "http": tc.wantHTTP}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: ports after admission: -want, +got:\n%s", name, diff)
			}
		})
	}
}
