/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAppendItem(t *testing.T) {
	cases := map[string]struct {
		reason string
		m      map[string]any
		item   map[string]any
		want   map[string]any
	}{
		"Empty": {
			reason: "A missing list gets the item.",
			m:      map[string]any{},
			item:   map[string]any{"name": "a", "v": 1},
			want:   map[string]any{"l": []any{map[string]any{"name": "a", "v": 1}}},
		},
		"Appends": {
			reason: "Items of other names stay, in order.",
			m:      map[string]any{"l": []any{map[string]any{"name": "a"}}},
			item:   map[string]any{"name": "b"},
			want:   map[string]any{"l": []any{map[string]any{"name": "a"}, map[string]any{"name": "b"}}},
		},
		"Replaces": {
			reason: "An item of the same name is replaced, so a step run twice (an upgrade) adds nothing twice.",
			m:      map[string]any{"l": []any{map[string]any{"name": "a", "v": 1}, map[string]any{"name": "b"}}},
			item:   map[string]any{"name": "a", "v": 2},
			want:   map[string]any{"l": []any{map[string]any{"name": "b"}, map[string]any{"name": "a", "v": 2}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			appendItem(tc.m, "l", tc.item)
			if diff := cmp.Diff(tc.want, tc.m); diff != "" {
				t.Errorf("%s\nappendItem(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDeploymentTemplate(t *testing.T) {
	// Crossplane's DeploymentRuntimeConfig CRD requires a selector, and
	// the runtime merges a container named package-runtime into the
	// package's own.
	want := map[string]any{"spec": map[string]any{
		"selector": map[string]any{},
		"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "package-runtime", "args": []any{"--poll=5s", "--debug"}}},
		}},
	}}
	if diff := cmp.Diff(want, deploymentTemplate([]string{"--poll=5s", "--debug"})); diff != "" {
		t.Errorf("deploymentTemplate: -want, +got:\n%s", diff)
	}
}

// TestRenderRuntime renders the provider's runtime as the harness does:
// examples/runtime's DeploymentRuntimeConfig with the harness's layers over
// it. What the examples promise (a read-only root, a writable /tmp, two
// replicas with leader election) reaches the pod spec, and the layers add
// to it without replacing it.
func TestRenderRuntime(t *testing.T) {
	args := runtimeLayer{name: layerArgs, edit: func(_, ct map[string]any) { ct["args"] = anySlice([]string{"--poll=5s"}) }}
	ca := runtimeLayer{name: endpointCAConfigMap, edit: func(spec, ct map[string]any) {
		appendItem(spec, "volumes", map[string]any{"name": endpointCAConfigMap})
		appendItem(ct, "env", map[string]any{"name": "SSL_CERT_FILE", "value": "/ca.crt"})
	}}
	type pod struct {
		Replicas     any
		ReadOnlyRoot any
		Args         any
		Env          []string
		Volumes      []string
	}
	cases := map[string]struct {
		file string
		want pod
	}{
		"Default": {
			file: RuntimeDefault,
			want: pod{ReadOnlyRoot: true, Args: []any{"--poll=5s"}, Env: []string{"TMPDIR", "GOMEMLIMIT", "SSL_CERT_FILE"}, Volumes: []string{"tmp", endpointCAConfigMap}},
		},
		"HA": {
			file: RuntimeHA,
			want: pod{Replicas: float64(2), ReadOnlyRoot: true, Args: []any{"--poll=5s"}, Env: []string{"LEADER_ELECTION", "TMPDIR", "GOMEMLIMIT", "SSL_CERT_FILE"}, Volumes: []string{"tmp", endpointCAConfigMap}},
		},
	}
	stamps := map[string]bool{}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			drc, _, err := readRuntime(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			if err := renderRuntime(drc, []runtimeLayer{args, ca}); err != nil {
				t.Fatal(err)
			}
			tmpl := drc.Object["spec"].(map[string]any)["deploymentTemplate"].(map[string]any)["spec"].(map[string]any)
			spec := tmpl["template"].(map[string]any)["spec"].(map[string]any)
			ct := spec["containers"].([]any)[0].(map[string]any)
			got := pod{Replicas: tmpl["replicas"], ReadOnlyRoot: ct["securityContext"].(map[string]any)["readOnlyRootFilesystem"], Args: ct["args"]}
			for _, e := range ct["env"].([]any) {
				got.Env = append(got.Env, e.(map[string]any)["name"].(string))
			}
			for _, v := range spec["volumes"].([]any) {
				got.Volumes = append(got.Volumes, v.(map[string]any)["name"].(string))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("renderRuntime(%s): -want, +got:\n%s", tc.file, diff)
			}
			stamp := tmpl["template"].(map[string]any)["metadata"].(map[string]any)["annotations"].(map[string]any)[annotationRuntime]
			if stamp == nil || stamps[stamp.(string)] {
				t.Errorf("renderRuntime(%s): stamp %v, want one of its own", tc.file, stamp)
			}
			stamps[stamp.(string)] = true
		})
	}
}

// TestRBACRoles reads examples/rbac as the harness does: two ClusterRoles,
// and a DeploymentRuntimeConfig naming the ServiceAccount examples/runtime's
// also name.
func TestRBACRoles(t *testing.T) {
	roles, err := rbacRoles()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range roles {
		names = append(names, r.GetName())
	}
	if diff := cmp.Diff([]string{RoleInjectedIdentity, RoleNamespaces}, names); diff != "" {
		t.Errorf("rbacRoles: -want, +got:\n%s", diff)
	}
}
