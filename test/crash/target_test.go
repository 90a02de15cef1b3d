/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package crash

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
)

// A registration is what one backend adds to the suite, from its own file
// of this package: var _ = registerTarget(b, registration{...}).
type registration struct {
	// start sets the backend's test double up, points its
	// ClusterProviderConfig at it and returns its target; nil when it
	// cannot run here (it says why, and fails when CI=true).
	start func(t *testing.T, e *env) *target
	// flags are the provider flags the test double needs.
	flags []string
}

// registrations are the backends' targets by backend.
var registrations = map[cluster.Backend]registration{}

// registerTarget registers the target of backend b.
func registerTarget(b cluster.Backend, r registration) bool {
	registrations[b] = r
	return true
}

// startTargets starts the target of every backend of the provider, in the
// order of the registry; a backend without one fails the test.
func startTargets(t *testing.T, e *env) []*target {
	t.Helper()
	var out []*target
	for _, b := range cluster.Backends() {
		r, ok := registrations[b]
		if !ok {
			t.Errorf("the %s backend has no kill -9 target: add test/crash/%s_test.go with var _ = registerTarget(...)", b, b)
			continue
		}
		if tg := r.start(t, e); tg != nil {
			out = append(out, tg)
		}
	}
	return out
}

// TestEveryBackendHasATarget is startTargets' check, without the control
// plane: every backend of the provider goes through the kill -9 suite.
func TestEveryBackendHasATarget(t *testing.T) {
	for _, b := range cluster.Backends() {
		if _, ok := registrations[b]; !ok {
			t.Errorf("the %s backend has no kill -9 target: add test/crash/%s_test.go with var _ = registerTarget(...)", b, b)
		}
	}
}

// targetFlags are the provider flags of every backend's target.
func targetFlags() []string {
	var out []string
	for _, b := range cluster.Backends() {
		out = append(out, registrations[b].flags...)
	}
	return out
}

// A target is one backend under test: how its managed resources look, and
// how the suite counts what exists at the backend, bypassing the provider.
type target struct {
	name             string
	apiVersion, kind string
	// namespace holds the target's managed resources.
	namespace   string
	forProvider func() map[string]any
	// hold catches a create in flight; nil when the suite cannot hold the
	// backend's responses.
	hold *trap
	// instances lists every instance at the backend.
	instances func(ctx context.Context) ([]instance, error)
	// leftovers lists every part of any instance left at the backend.
	leftovers func(ctx context.Context) ([]string, error)

	// windowKills counts kills between the backend call and the write of
	// the creation result, checked on the managed resource.
	windowKills int
}

// An instance at the backend.
type instance struct {
	// name is the instance's name: the managed resource's external name.
	name string
	// owner is the owner UID the instance's labels name, "" when the
	// backend keeps ownership elsewhere.
	owner string
	// version changes when the instance is deleted and made again.
	version string
}

// mr returns managed resource i of the target.
func (tg *target) mr(i int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": tg.apiVersion,
		"kind":       tg.kind,
		"metadata":   map[string]any{"name": fmt.Sprintf("p%02d", i), "namespace": tg.namespace},
		"spec": map[string]any{
			"forProvider":       tg.forProvider(),
			"providerConfigRef": map[string]any{"kind": "ClusterProviderConfig", "name": configName},
		},
	}}
}

// tally is what the suite found at a backend for its managed resources.
type tally struct {
	// missing are managed resources without an instance.
	missing []string
	// duplicates are instances beyond one per managed resource, and
	// instances no managed resource owns.
	duplicates []string
	// versions of the instances by name.
	versions map[string]string
}

// count matches the instances at the backend with the managed resources:
// exactly one instance, named by its external name and labelled with its
// UID where the backend has labels, per managed resource.
func count(mrs []unstructured.Unstructured, ins []instance) tally {
	byName := map[string][]instance{}
	for _, in := range ins {
		byName[in.name] = append(byName[in.name], in)
	}
	t := tally{versions: map[string]string{}}
	for i := range mrs {
		mr := &mrs[i]
		name := meta.GetExternalName(mr)
		got := byName[name]
		delete(byName, name)
		if name == "" || len(got) == 0 {
			t.missing = append(t.missing, mr.GetName())
			continue
		}
		for j, in := range got {
			if in.owner != "" && in.owner != string(mr.GetUID()) {
				t.duplicates = append(t.duplicates, fmt.Sprintf("%s (labelled for owner %s, not %s)", in.name, in.owner, mr.GetUID()))
				continue
			}
			if j > 0 {
				t.duplicates = append(t.duplicates, in.name+" (a second instance)")
				continue
			}
			t.versions[in.name] = in.version
		}
	}
	for name := range byName {
		t.duplicates = append(t.duplicates, name+" (no managed resource has this external name)")
	}
	sort.Strings(t.duplicates)
	return t
}

// changed lists the instances of before that are gone or were made again
// in after.
func changed(before, after map[string]string) []string {
	var out []string
	for name, v := range before {
		switch w, ok := after[name]; {
		case !ok:
			out = append(out, name+" deleted")
		case w != v:
			out = append(out, name+" made again")
		}
	}
	sort.Strings(out)
	return out
}

func short(s []string) string {
	if len(s) > 5 {
		return strings.Join(s[:5], "; ") + fmt.Sprintf("; and %d more", len(s)-5)
	}
	return strings.Join(s, "; ")
}
