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
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	const uid = "0b3c1e0e-5f3a-4c1e-9a57-1a2b3c4d5e6f"
	found := func(_ context.Context, name string) (*corev1.Namespace, error) {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid}}, nil
	}
	forbidden := func(_ context.Context, name string) (*corev1.Namespace, error) {
		return nil, kerrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, name, errors.New("no RBAC"))
	}
	never := func(context.Context, string) (*corev1.Namespace, error) {
		return nil, errors.New("an explicit instance must not be derived")
	}
	type want struct {
		id  string
		err string
	}
	cases := map[string]struct {
		reason   string
		explicit string
		get      namespaceGetter
		want     want
	}{
		"Derived": {
			reason: "Without a flag, the instance is unique to the control plane.",
			get:    found, want: want{id: "provider-egressproxy-" + uid},
		},
		"Explicit": {
			reason:   "A canonical explicit value is used as is, without reading the API server.",
			explicit: "prod-eu", get: never, want: want{id: "prod-eu"},
		},
		"Forbidden": {
			reason: "A provider that may not read kube-system tells the operator what to do.",
			get:    forbidden, want: want{err: "set --provider-instance explicitly"},
		},
		"NoUID": {
			reason: "A namespace without a UID derives nothing.",
			get:    func(context.Context, string) (*corev1.Namespace, error) { return &corev1.Namespace{}, nil },
			want:   want{err: "set --provider-instance explicitly"},
		},
		"UpperCase": {
			reason:   "Prod-EU would be folded into prod-eu by label sanitising.",
			explicit: "Prod-EU", get: never, want: want{err: `--provider-instance: provider instance "Prod-EU"`},
		},
		"Dots": {
			reason:   "prod.eu would be folded into prod-eu.",
			explicit: "prod.eu", get: never, want: want{err: `--provider-instance: provider instance "prod.eu"`},
		},
		"TooLong": {
			reason:   "A value longer than a label value would be cut.",
			explicit: strings.Repeat("a", 64), get: never, want: want{err: "--provider-instance: "},
		},
		"TrailingDash": {
			reason:   "A trailing dash would be trimmed.",
			explicit: "prod-", get: never, want: want{err: "--provider-instance: "},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			id, err := providerInstance(t.Context(), tc.explicit, tc.get)
			if tc.want.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want.err) {
					t.Fatalf("%s\nproviderInstance: want an error containing %q, got %v", tc.reason, tc.want.err, err)
				}
				return
			}
			if err != nil || id != tc.want.id {
				t.Fatalf("%s\nproviderInstance: want %q, got %q, %v", tc.reason, tc.want.id, id, err)
			}
			if len(id) > 63 {
				t.Errorf("%s\nproviderInstance: %q is longer than a label value", tc.reason, id)
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

// TestInstanceOnAPIServer runs the command against a real kube-apiserver:
// it derives the instance from the UID of kube-system, logs it and exports
// it as a metric; as a user that may not read kube-system, it exits and
// tells the operator to set the flag.
func TestInstanceOnAPIServer(t *testing.T) {
	env := kubeenv.Start(t)
	ns := &corev1.Namespace{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: metav1.NamespaceSystem}, ns); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`egressproxy_provider_instance_info{instance="provider-egressproxy-%s"} 1`, ns.GetUID())

	t.Run("Derived", func(t *testing.T) {
		metrics, health := freePort(t), freePort(t)
		p := startProvider(t, env.Kubeconfig, nil,
			"--metrics-bind-address="+metrics, "--health-probe-bind-address="+health,
			"--gc-interval=0", "--health-interval=0")
		p.await(t, time.Minute, 500*time.Millisecond, func() (bool, string) {
			return strings.Contains(scrape(metrics), want), "metrics never showed " + want
		})
		if log := p.log.String(); !strings.Contains(log, "provider-egressproxy-"+string(ns.GetUID())) {
			t.Errorf("the log does not name the derived provider instance:\n%s", log)
		}
		// It made the key of generated passwords in its namespace.
		key := &corev1.Secret{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: credentialsKeySecret}, key); err != nil {
			t.Errorf("the key of generated passwords: %v", err)
		} else if len(key.Data[credentialsKeyField]) != 32 || key.Immutable == nil || !*key.Immutable {
			t.Errorf("the key of generated passwords must be 32 bytes in an immutable Secret: %d bytes, immutable %v", len(key.Data[credentialsKeyField]), key.Immutable)
		}
	})

	t.Run("Forbidden", func(t *testing.T) {
		// The same credentials, impersonating a user without any RBAC.
		kc, err := clientcmd.LoadFromFile(env.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range kc.AuthInfos {
			a.Impersonate = "system:serviceaccount:crossplane-system:provider-egressproxy"
		}
		path := filepath.Join(t.TempDir(), "kubeconfig")
		if err := clientcmd.WriteToFile(*kc, path); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		out, err := provider(ctx, path).CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Fatalf("provider without get on kube-system: want a non-zero exit, got %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "set --provider-instance explicitly") {
			t.Errorf("provider without get on kube-system: want advice to set --provider-instance, got:\n%s", out)
		}
	})
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
