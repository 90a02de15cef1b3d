/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

// corednsObjects renders the CoreDNS manifest and decodes it strictly into
// the API's types, so a misspelt field fails here, not in the cluster.
func corednsObjects(t *testing.T, image string) map[string]runtime.Object {
	t.Helper()
	b, err := renderCoreDNS(image)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode("coredns.yaml", b)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]runtime.Object{}
	for _, u := range objs {
		o, err := scheme.Scheme.New(u.GroupVersionKind())
		if err != nil {
			t.Fatal(err)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, o, true); err != nil {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
		out[u.GetKind()+"/"+u.GetName()] = o
	}
	return out
}

func TestCoreDNSManifest(t *testing.T) {
	objs := corednsObjects(t, "egressproxy.local/coredns:v1.12.4-0123")
	type summary struct {
		Objects   []string
		ClusterIP string
		Ports     []string
		Image     string
		Pull      corev1.PullPolicy
		DNSPolicy corev1.DNSPolicy
		NonRoot   bool
		ReadOnly  bool
	}
	got := summary{}
	for k := range objs {
		got.Objects = append(got.Objects, k)
	}
	slices.Sort(got.Objects)
	if svc, ok := objs["Service/kube-dns"].(*corev1.Service); ok {
		got.ClusterIP = svc.Spec.ClusterIP
		for _, p := range svc.Spec.Ports {
			got.Ports = append(got.Ports, string(p.Protocol)+"/"+p.TargetPort.String()+"/"+p.Name)
		}
	}
	if d, ok := objs["Deployment/coredns"].(*appsv1.Deployment); ok {
		s := d.Spec.Template.Spec
		c := s.Containers[0]
		got.Image, got.Pull, got.DNSPolicy = c.Image, c.ImagePullPolicy, s.DNSPolicy
		got.NonRoot = s.SecurityContext != nil && s.SecurityContext.RunAsNonRoot != nil && *s.SecurityContext.RunAsNonRoot
		got.ReadOnly = c.SecurityContext != nil && c.SecurityContext.ReadOnlyRootFilesystem != nil && *c.SecurityContext.ReadOnlyRootFilesystem
	}
	want := summary{
		Objects: []string{
			"ClusterRole/system:coredns", "ClusterRoleBinding/system:coredns", "ConfigMap/coredns",
			"Deployment/coredns", "Service/kube-dns", "ServiceAccount/coredns",
		},
		ClusterIP: ClusterDNS,
		// No targetPort: the Service's port, 53.
		Ports:     []string{"UDP/0/dns", "TCP/0/dns-tcp"},
		Image:     "egressproxy.local/coredns:v1.12.4-0123",
		Pull:      corev1.PullNever,
		DNSPolicy: corev1.DNSDefault,
		NonRoot:   true,
		ReadOnly:  true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the CoreDNS manifest: -want, +got:\n%s", diff)
	}
}

// TestCoreDNSCorefile checks the Corefile against the CoreDNS that
// hack/tools.sh built: it uses only plugins that binary has (it has only
// those the build names), and none that sends a lookup out of the cluster.
func TestCoreDNSCorefile(t *testing.T) {
	cm, ok := corednsObjects(t, "img")["ConfigMap/coredns"].(*corev1.ConfigMap)
	if !ok {
		t.Fatal("the manifest has no ConfigMap coredns")
	}
	corefile := cm.Data["Corefile"]
	// The directives of the server block: each line's first word, one
	// level in.
	var used []string
	for _, l := range strings.Split(corefile, "\n") {
		if m := regexp.MustCompile(`^    ([a-z]+)`).FindStringSubmatch(l); m != nil {
			used = append(used, m[1])
		}
	}
	for _, p := range []string{"forward", "proxy", "grpc", "etcd"} {
		if slices.Contains(used, p) {
			t.Errorf("the Corefile uses %s, which would send lookups out of the cluster", p)
		}
	}
	out, err := exec.CommandContext(t.Context(), testenv.Tool(t, "coredns"), "-plugins").Output()
	if err != nil {
		t.Fatal(err)
	}
	// One plugin a line.
	have := strings.Fields(string(out))
	for _, p := range used {
		if !slices.Contains(have, p) {
			t.Errorf("the Corefile uses %s, which the CoreDNS build lacks:\n%s", p, out)
		}
	}
	if len(used) == 0 {
		t.Errorf("no directive found in the Corefile:\n%s", corefile)
	}
}
