/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	kubeenv "github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

// envRunMain makes the test binary run the provider's main instead of the
// tests, so the tests run the real command without building it again.
const envRunMain = "EGRESSPROXY_TEST_RUN_PROVIDER"

func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// provider returns the provider command with args and the given kubeconfig,
// in the namespace default (as Crossplane's package runtime says it: by
// POD_NAMESPACE), which every API server has.
func provider(ctx context.Context, kubeconfig string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), envRunMain+"=1", "KUBECONFIG="+kubeconfig, "POD_NAMESPACE="+metav1.NamespaceDefault)
	return cmd
}

func TestProviderInstance(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	derived, err := providerInstance("", key)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		id  string
		err string
	}
	cases := map[string]struct {
		reason   string
		explicit string
		key      []byte
		want     want
	}{
		"Derived": {
			reason: "Without a flag, the same key gives the same instance: every replica and restart agrees.",
			key:    key, want: want{id: derived},
		},
		"OtherKey": {
			reason: "Another installation, another key, another instance.",
			key:    bytes.Repeat([]byte{8}, 32), want: want{id: "provider-egressproxy-"},
		},
		"Explicit": {
			reason:   "A canonical explicit value is used as is.",
			explicit: "prod-eu", key: key, want: want{id: "prod-eu"},
		},
		"UpperCase": {
			reason:   "Prod-EU would be folded into prod-eu by label sanitising.",
			explicit: "Prod-EU", key: key, want: want{err: `--provider-instance: provider instance "Prod-EU"`},
		},
		"Dots": {
			reason:   "prod.eu would be folded into prod-eu.",
			explicit: "prod.eu", key: key, want: want{err: `--provider-instance: provider instance "prod.eu"`},
		},
		"TooLong": {
			reason:   "A value longer than a label value would be cut.",
			explicit: strings.Repeat("a", 64), key: key, want: want{err: "--provider-instance: "},
		},
		"TrailingDash": {
			reason:   "A trailing dash would be trimmed.",
			explicit: "prod-", key: key, want: want{err: "--provider-instance: "},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			id, err := providerInstance(tc.explicit, tc.key)
			if tc.want.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want.err) {
					t.Fatalf("%s\nproviderInstance: want an error containing %q, got %v", tc.reason, tc.want.err, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nproviderInstance: %v", tc.reason, err)
			}
			// OtherKey wants only the prefix, and another instance.
			if name == "OtherKey" {
				if !strings.HasPrefix(id, tc.want.id) || id == derived {
					t.Fatalf("%s\nproviderInstance: want %q and not %q, got %q", tc.reason, tc.want.id+"...", derived, id)
				}
			} else if id != tc.want.id {
				t.Fatalf("%s\nproviderInstance: want %q, got %q", tc.reason, tc.want.id, id)
			}
			if backend.ValidateInstance(id) != nil {
				t.Errorf("%s\nproviderInstance: %q is not a canonical label value", tc.reason, id)
			}
		})
	}
}

// TestRefuseInstance runs the command with values that label sanitising
// would change: it must exit with an error naming the flag, before it
// looks for an API server (the kubeconfig does not exist).
func TestRefuseInstance(t *testing.T) {
	for _, v := range []string{"Prod-EU", "prod.eu", strings.Repeat("a", 64), "-prod"} {
		t.Run(v, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			out, err := provider(ctx, filepath.Join(t.TempDir(), "missing"), "--provider-instance="+v).CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("provider --provider-instance=%s: want a non-zero exit, got %v\n%s", v, err, out)
			}
			if !strings.Contains(string(out), "--provider-instance") || !strings.Contains(string(out), fmt.Sprintf("%q", v)) {
				t.Errorf("provider --provider-instance=%s: want a message naming the flag and the value, got:\n%s", v, out)
			}
		})
	}
}

// TestInstanceOnAPIServer runs the command against a real kube-apiserver
// with only the rights Crossplane's RBAC manager grants a provider (its
// ClusterRole crossplane:provider:<revision>:system, rendered as Crossplane
// renders it): it must make the key of generated passwords, derive the
// instance from it, log it, export it as a metric and keep running. It
// exited before, wanting get on namespaces/kube-system, which Crossplane
// never grants: a crash loop on every install.
func TestInstanceOnAPIServer(t *testing.T) {
	env := kubeenv.Start(t)
	const sa = "provider-egressproxy-abc123"
	role := crossplaneSystemRole(t, "crossplane:provider:"+sa+":system")
	if err := env.Client.Create(t.Context(), role); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: metav1.NamespaceDefault, Name: sa}},
	}
	if err := env.Client.Create(t.Context(), binding); err != nil {
		t.Fatal(err)
	}
	// The same credentials, impersonating the provider's ServiceAccount.
	kc, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range kc.AuthInfos {
		a.Impersonate = "system:serviceaccount:" + metav1.NamespaceDefault + ":" + sa
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}

	metrics, health := freePort(t), freePort(t)
	p := startProvider(t, path, nil,
		"--metrics-bind-address="+metrics, "--health-probe-bind-address="+health,
		"--gc-interval=0", "--health-interval=0")
	// It made the key of generated passwords in its namespace.
	key := &corev1.Secret{}
	p.await(t, time.Minute, 500*time.Millisecond, func() (bool, string) {
		err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: credentialsKeySecret}, key)
		return err == nil, fmt.Sprintf("the key of generated passwords: %v", err)
	})
	if len(key.Data[credentialsKeyField]) != 32 || key.Immutable == nil || !*key.Immutable {
		t.Errorf("the key of generated passwords must be 32 bytes in an immutable Secret: %d bytes, immutable %v", len(key.Data[credentialsKeyField]), key.Immutable)
	}
	id, err := providerInstance("", key.Data[credentialsKeyField])
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`egressproxy_provider_instance_info{instance=%q} 1`, id)
	p.await(t, time.Minute, 500*time.Millisecond, func() (bool, string) {
		return strings.Contains(scrape(metrics), want), "metrics never showed " + want
	})
	if log := p.log.String(); !strings.Contains(log, id) {
		t.Errorf("the log does not name the derived provider instance %s:\n%s", id, log)
	}
	// Still running a while later: no crash loop.
	select {
	case err := <-p.done:
		p.done <- err
		t.Fatalf("provider exited: %v\n%s", err, p.log.String())
	case <-time.After(3 * time.Second):
	}
}

// crossplaneSystemRole renders the ClusterRole Crossplane's RBAC manager
// binds to a provider's ServiceAccount (internal/controller/rbac/provider/
// roles in crossplane/crossplane: RenderClusterRoles' system role), for the
// CRDs of package/provider and the safe-start capability.
func crossplaneSystemRole(t *testing.T, name string) *rbacv1.ClusterRole {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "package", "provider", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the provider's CRDs: %v, %d files", err, len(files))
	}
	resources := map[string][]string{}
	var groups []string
	for _, f := range files {
		b, err := os.ReadFile(f) //nolint:gosec // A file of this repository.
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(b, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		g := crd.Spec.Group
		if _, ok := resources[g]; !ok {
			groups = append(groups, g)
		}
		resources[g] = append(resources[g], crd.Spec.Names.Plural, crd.Spec.Names.Plural+"/status")
	}
	system := []string{"get", "list", "watch", "update", "patch", "create"}
	r := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, g := range groups {
		r.Rules = append(r.Rules, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: resources[g], Verbs: system})
	}
	r.Rules = append(r.Rules,
		rbacv1.PolicyRule{APIGroups: groups, Resources: []string{"*/finalizers"}, Verbs: []string{"update"}},
		rbacv1.PolicyRule{APIGroups: []string{"", "coordination.k8s.io"}, Resources: []string{"secrets", "configmaps", "events", "leases"}, Verbs: []string{"*"}},
		rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}},
	)
	return r
}

// runningProvider is a provider command that startProvider started.
type runningProvider struct {
	log  bytes.Buffer
	done chan error
}

// startProvider starts the provider command against kubeconfig, with env
// added to its environment; it is stopped when the test ends.
func startProvider(t *testing.T, kubeconfig string, env []string, args ...string) *runningProvider {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &runningProvider{done: make(chan error, 1)}
	cmd := provider(ctx, kubeconfig, args...)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = &p.log, &p.log
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() { cancel(); <-p.done })
	return p
}

// await calls cond every interval until it holds. It fails the test when
// the provider exits first, or after timeout with cond's last message.
func (p *runningProvider) await(t *testing.T, timeout, interval time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("provider exited: %v\n%s", err, p.log.String())
		case <-time.After(interval):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s; log:\n%s", msg, p.log.String())
		}
	}
}

// freePort returns a free loopback address.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// scrape returns the metrics served on addr, or "" while they are not.
func scrape(addr string) string {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
