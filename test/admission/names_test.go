/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package admission

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

// xrdCRDs returns the CRDs Crossplane makes of an XRD: the composite
// resource's and, if it offers one, the claim's, with the XRD's names. The
// schema does not matter here: only what discovery serves.
func xrdCRDs(t *testing.T, path string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	xrd := struct {
		Spec struct {
			Group      string                                         `json:"group"`
			Scope      string                                         `json:"scope"`
			Names      apiextensionsv1.CustomResourceDefinitionNames  `json:"names"`
			ClaimNames *apiextensionsv1.CustomResourceDefinitionNames `json:"claimNames"`
		} `json:"spec"`
	}{}
	if err := yaml.Unmarshal(b, &xrd); err != nil {
		t.Fatal(err)
	}
	crd := func(n apiextensionsv1.CustomResourceDefinitionNames, scope apiextensionsv1.ResourceScope) *apiextensionsv1.CustomResourceDefinition {
		preserve := true
		return &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: n.Plural + "." + xrd.Spec.Group},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: xrd.Spec.Group,
				Names: n,
				Scope: scope,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1alpha1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", XPreserveUnknownFields: &preserve,
					}},
				}},
			},
		}
	}
	scope := apiextensionsv1.ClusterScoped
	if xrd.Spec.Scope == "Namespaced" {
		scope = apiextensionsv1.NamespaceScoped
	}
	out := []*apiextensionsv1.CustomResourceDefinition{crd(xrd.Spec.Names, scope)}
	if xrd.Spec.ClaimNames != nil {
		out = append(out, crd(*xrd.Spec.ClaimNames, apiextensionsv1.NamespaceScoped))
	}
	return out
}

// TestKubectlNamesResolve installs the CRDs both Configurations make beside
// the provider's, and resolves every name of the claim, the XR and the
// namespaced XR the way kubectl does (category expansion first, then
// short names, then the discovery REST mapper): each must name exactly one
// resource, and none may be a category.
func TestKubectlNamesResolve(t *testing.T) {
	e := kube.Shared(t)
	ctx := context.Background()
	s := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(e.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, cfg := range []string{"configuration", "configuration-namespaced"} {
		crds = append(crds, xrdCRDs(t, filepath.Join(testenv.RepoRoot(), "package", cfg, "xrd.yaml"))...)
	}
	for _, crd := range crds {
		if err := c.Create(ctx, crd); err != nil && !kerrors.IsAlreadyExists(err) {
			t.Fatalf("cannot create CRD %s: %v", crd.GetName(), err)
		}
	}
	t.Cleanup(func() {
		for _, crd := range crds {
			_ = c.Delete(context.Background(), crd)
		}
	})

	var words []string
	for _, crd := range crds {
		n := crd.Spec.Names
		singular := n.Singular
		if singular == "" {
			singular = strings.ToLower(n.Kind)
		}
		words = append(words, n.Plural, singular, strings.ToLower(n.Kind))
		words = append(words, n.ShortNames...)
	}

	dc, err := discovery.NewDiscoveryClientForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	cached := memory.NewMemCacheClient(dc)
	kube.Eventually(t, "every name of the claim, the XR and the namespaced XR to resolve to one resource", func() (bool, string) {
		cached.Invalidate()
		mapper := restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(cached), cached, nil)
		categories := restmapper.NewDiscoveryCategoryExpander(cached)
		var wrong []string
		for _, w := range words {
			if grs, ok := categories.Expand(w); ok {
				wrong = append(wrong, fmt.Sprintf("%s is a category of %v", w, grs))
				continue
			}
			gvrs, err := mapper.ResourcesFor(schema.GroupVersionResource{Resource: w})
			seen := map[schema.GroupResource]bool{}
			for _, r := range gvrs {
				seen[r.GroupResource()] = true
			}
			if err != nil || len(seen) != 1 {
				var names []string
				for gr := range seen {
					names = append(names, gr.String())
				}
				sort.Strings(names)
				wrong = append(wrong, fmt.Sprintf("%s names %v (%v)", w, names, err))
			}
		}
		return len(wrong) == 0, strings.Join(wrong, "; ")
	})
}
