/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package kube starts a real kube-apiserver and etcd (controller-runtime's
// envtest, on binaries hack/tools.sh builds from the module proxy) with the
// provider's CRDs installed, for integration tests.
package kube

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

const (
	errNoBinaries   = "the envtest binaries are not built (hack/tools.sh build etcd kube-apiserver kubectl)"
	errStart        = "cannot start kube-apiserver and etcd"
	errScheme       = "cannot build the scheme"
	errClient       = "cannot create a client"
	errWriteKubecfg = "cannot write a kubeconfig"
)

// Env is a running control plane.
type Env struct {
	// Config reaches the apiserver as a member of system:masters.
	Config *rest.Config
	// Client reads and writes core types and the provider's APIs.
	Client client.Client
	// Scheme knows core types and the provider's APIs.
	Scheme *runtime.Scheme
	// Kubeconfig is the path of a kubeconfig file for Config, for child
	// processes and kubectl.
	Kubeconfig string
	// BinDir holds etcd, kube-apiserver and kubectl.
	BinDir string

	env *envtest.Environment
	dir string
}

// BinDir returns the folder of the envtest binaries, or "" if they are not
// built yet.
func BinDir() string {
	out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "tools.sh"), "cached-envtest").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// CRDDirs are the folders of the CRDs installed into every Env.
func CRDDirs() []string {
	return []string{filepath.Join(testenv.RepoRoot(), "package", "provider", "crds")}
}

// New starts a control plane with the provider's CRDs and extra CRD folders.
func New(extraCRDDirs ...string) (*Env, error) { return NewWithFlags(nil, extraCRDDirs...) }

func (e *Env) init() error {
	c, err := NewClient(e.Config)
	if err != nil {
		return err
	}
	e.Client, e.Scheme = c, c.Scheme()
	dir, err := os.MkdirTemp("", "egressproxy-kube-")
	if err != nil {
		return errors.Wrap(err, errWriteKubecfg)
	}
	e.dir = dir
	e.Kubeconfig = filepath.Join(dir, "kubeconfig")
	return errors.Wrap(WriteKubeconfig(e.Config, e.Kubeconfig), errWriteKubecfg)
}

// NewClient returns a client of cfg that knows core types and the
// provider's APIs.
func NewClient(cfg *rest.Config) (client.Client, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, errors.Wrap(err, errScheme)
	}
	if err := registry.AddToScheme(s); err != nil {
		return nil, errors.Wrap(err, errScheme)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	return c, errors.Wrap(err, errClient)
}

// ForConfig returns an Env of a control plane someone else runs (say a
// real node's, package node), with kubeconfig a file for cfg. Its Stop
// stops nothing.
func ForConfig(cfg *rest.Config, kubeconfig string) (*Env, error) {
	c, err := NewClient(cfg)
	if err != nil {
		return nil, err
	}
	return &Env{Config: cfg, Client: c, Scheme: c.Scheme(), Kubeconfig: kubeconfig}, nil
}

// Stop stops the control plane and removes its files.
func (e *Env) Stop() {
	if e.env != nil {
		_ = e.env.Stop()
	}
	if e.dir != "" {
		_ = os.RemoveAll(e.dir)
	}
}

// Start starts a control plane for one test and stops it when the test ends.
// It skips (fails in CI) when the binaries are not built.
func Start(t testing.TB, extraCRDDirs ...string) *Env {
	t.Helper()
	return StartWithFlags(t, nil, extraCRDDirs...)
}

var shared struct {
	once sync.Once
	env  *Env
	err  error
}

// Shared returns one control plane per test binary, started on first use;
// Main stops it. Tests that share it must use namespaces of their own.
func Shared(t testing.TB) *Env {
	t.Helper()
	if BinDir() == "" {
		testenv.Missing(t, errNoBinaries)
	}
	shared.once.Do(func() { shared.env, shared.err = New() })
	if shared.err != nil {
		t.Fatalf("%v", shared.err)
	}
	return shared.env
}

// Main runs the tests of a package and stops the shared control plane:
// func TestMain(m *testing.M) { os.Exit(kube.Main(m)) }.
func Main(m *testing.M) int {
	code := m.Run()
	if shared.env != nil {
		shared.env.Stop()
	}
	return code
}

// Namespace creates a namespace for one test and returns its name.
func (e *Env) Namespace(t testing.TB, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := e.Client.Create(t.Context(), ns); err != nil {
		t.Fatalf("cannot create namespace: %v", err)
	}
	return ns.GetName()
}

// WriteKubeconfig writes a kubeconfig file for cfg.
func WriteKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
	}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest"}
	kc.CurrentContext = "envtest"
	return clientcmd.WriteToFile(*kc, path)
}

// CreateNamespace creates a namespace of a given name, if it is missing.
func (e *Env) CreateNamespace(t testing.TB, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.Client.Create(t.Context(), ns); client.IgnoreAlreadyExists(err) != nil {
		t.Fatalf("cannot create namespace %s: %v", name, err)
	}
}
