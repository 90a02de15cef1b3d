/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best dot-imported.
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
)

// How long things may take. Everything here is local and quick; the
// timeouts only bound a broken run.
const (
	readyTimeout  = 2 * time.Minute
	changeTimeout = time.Minute
	poll          = 250 * time.Millisecond
)

// LabelBackend selects a Composition by backend, as app teams do.
const LabelBackend = "egressproxy.io/backend"

// labelE2E selects the Compositions only this suite applies. They carry no
// backend label, so claims that select by backend never get one of them.
const labelE2E = "egressproxy.io/e2e"

// newClaim returns an EgressProxy claim that selects Compositions by labels.
func newClaim(ns, name string, selector map[string]string) *unstructured.Unstructured {
	sel := map[string]any{}
	for k, v := range selector {
		sel[k] = v
	}
	u := cluster.Object(cluster.ClaimGVK())
	u.SetNamespace(ns)
	u.SetName(name)
	u.Object["spec"] = map[string]any{
		"compositionSelector":        map[string]any{"matchLabels": sel},
		"allowedClientCIDRs":         []any{"10.0.0.0/8"},
		"allowedDestinations":        []any{"api.example.com", ".example.org"},
		"writeConnectionSecretToRef": map[string]any{"name": name + "-proxy"},
	}
	return u
}

// ensureNamespace creates a namespace if it is missing.
func ensureNamespace(ctx context.Context, name string) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	Expect(client.IgnoreAlreadyExists(env.c.Client.Create(ctx, ns))).To(Succeed())
}

// get reads an object, failing g when it cannot.
func get(ctx context.Context, g Gomega, gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	u, err := env.c.Get(ctx, gvk, ns, name)
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred(), "get %s %s/%s", gvk.Kind, ns, name)
	return u
}

// gone reports whether an object does not exist.
func gone(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) bool {
	_, err := env.c.Get(ctx, gvk, ns, name)
	return kerrors.IsNotFound(err)
}

// str returns a string field of an object, or "".
func str(u *unstructured.Unstructured, path ...string) string {
	s, _, _ := unstructured.NestedString(u.Object, path...)
	return s
}

// cond returns "Status: reason: message" of a condition, for assertions
// whose failure should show the message.
func cond(u *unstructured.Unstructured, typ string) string {
	c, ok := cluster.Condition(u, typ)
	if !ok {
		return "<no " + typ + " condition>"
	}
	return fmt.Sprintf("%v: %v: %v", c["status"], c["reason"], c["message"])
}

// composed is what a claim turned into.
type composed struct {
	xr, mr *unstructured.Unstructured
	mrGVK  schema.GroupVersionKind
}

// composedOf returns the claim's XR and the XR's managed resource once they
// exist, failing g otherwise.
func composedOf(ctx context.Context, g Gomega, claim *unstructured.Unstructured) composed {
	c := get(ctx, g, cluster.ClaimGVK(), claim.GetNamespace(), claim.GetName())
	xrName := str(c, "spec", "resourceRef", "name")
	g.Expect(xrName).NotTo(BeEmpty(), "the claim has no composite resource yet")
	xr := get(ctx, g, cluster.CompositeGVK(), "", xrName)
	refs, _, _ := unstructured.NestedSlice(xr.Object, "spec", "resourceRefs")
	g.Expect(refs).To(HaveLen(1), "the XR composes exactly one managed resource")
	ref, _ := refs[0].(map[string]any)
	gvk := schema.FromAPIVersionAndKind(fmt.Sprint(ref["apiVersion"]), fmt.Sprint(ref["kind"]))
	ns, _ := ref["namespace"].(string)
	if ns == "" {
		ns = claim.GetNamespace()
	}
	mr := get(ctx, g, gvk, ns, fmt.Sprint(ref["name"]))
	return composed{xr: xr, mr: mr, mrGVK: gvk}
}

// A traced resource of crossplane beta trace -o json.
type traced struct {
	Object   unstructured.Unstructured `json:"object"`
	Children []*traced                 `json:"children"`
}

// notReady is a resource that trace shows as not Ready or not Synced.
type notReady struct {
	Kind, Name, Namespace string
	Synced, Ready         string
}

func (n notReady) String() string {
	return fmt.Sprintf("%s %s/%s Synced=%s Ready=%s", n.Kind, n.Namespace, n.Name, n.Synced, n.Ready)
}

// traceJSON runs crossplane beta trace -o json on a claim.
func traceJSON(ctx context.Context, ns, name string) (*traced, error) {
	out, err := env.c.Trace(ctx, ns, name, "-o", "json")
	if err != nil {
		return nil, err
	}
	t := &traced{}
	return t, json.Unmarshal([]byte(out), t)
}

// unhealthy returns every resource of a trace that is not Synced or not
// Ready, the deepest (the cause) last.
func (t *traced) unhealthy() []notReady {
	var out []notReady
	var walk func(*traced)
	walk = func(r *traced) {
		s, rd := cond(&r.Object, "Synced"), cond(&r.Object, "Ready")
		if !strings.HasPrefix(s, "True") || !strings.HasPrefix(rd, "True") {
			out = append(out, notReady{Kind: r.Object.GetKind(), Name: r.Object.GetName(), Namespace: r.Object.GetNamespace(), Synced: s, Ready: rd})
		}
		for _, c := range r.Children {
			walk(c)
		}
	}
	walk(t)
	return out
}

// deleteAndWait deletes an object and waits until it is gone.
func deleteAndWait(ctx context.Context, u *unstructured.Unstructured) {
	err := env.c.Client.Delete(ctx, u)
	if kerrors.IsNotFound(err) {
		return
	}
	Expect(err).NotTo(HaveOccurred())
	Eventually(func() bool { return gone(ctx, u.GroupVersionKind(), u.GetNamespace(), u.GetName()) }).
		WithTimeout(changeTimeout).WithPolling(poll).Should(BeTrue(), "%s %s/%s is not deleted", u.GetKind(), u.GetNamespace(), u.GetName())
}

// annotate sets annotation key to value on u, a resource of the API server,
// as kubectl annotate --overwrite does, and leaves its other annotations.
func annotate(ctx context.Context, u *unstructured.Unstructured, key, value string) {
	GinkgoHelper()
	p := client.MergeFrom(u.DeepCopy())
	a := u.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[key] = value
	u.SetAnnotations(a)
	Expect(env.c.Client.Patch(ctx, u, p)).To(Succeed())
}
