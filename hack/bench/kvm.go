/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	golibvirt "github.com/digitalocean/go-libvirt"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kvmv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kvm/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/libvirtd"
)

const (
	// The test driver's own network.
	kvmNetwork = "default"
	kvmBase    = "base.qcow2"
	targetVirt = "libvirt"
	// perPool MRs share a pool: the test driver gives every pool 100 GiB,
	// and each MR takes a 1 GiB overlay and a seed.
	perPool = 90
)

// kvmPool is the pool of MR i (prefix bench) or baseline domain i (base).
func kvmPool(prefix string, i int) string { return fmt.Sprintf("%s-pool-%d", prefix, i/perPool) }

// kvmBench runs KVMProxy against the test driver of a private libvirtd:
// real RPCs, no VMs. Its state lives while a connection is open, so the
// bench holds one for the whole run.
type kvmBench struct {
	kube *kube.Env
	t    *testenv.Outside
	l    *golibvirt.Libvirt
	d    *libvirtd.Daemon
}

func (k *kvmBench) gvk() schema.GroupVersionKind {
	return kvmv1alpha1.SchemeGroupVersion.WithKind("KVMProxy")
}

func (k *kvmBench) start(ctx context.Context, r *runner) (e *env, err error) {
	k.t = testenv.NewOutside("bench", logf)
	// The libvirtd helpers are test helpers: a failure or skip panics
	// here and becomes an error.
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(testenv.OutsideFailure)
			if !ok {
				panic(r)
			}
			err = errors.New("cannot start a private libvirtd: " + f.Msg)
			if f.Skip {
				err = errors.Wrap(errMissing, err.Error())
			}
		}
	}()
	k.d = libvirtd.Start(k.t)
	k.l = k.d.DialURI(k.t, "test")
	for _, prefix := range []string{"bench", "base"} {
		for i := 0; i < r.o.n; i += perPool {
			if err := k.addPool(kvmPool(prefix, i)); err != nil {
				return nil, err
			}
		}
	}
	kb, hosts, err := startKube()
	if err != nil {
		return nil, err
	}
	k.kube = kb
	pc := cluster.KVMProviderConfig("ClusterProviderConfig", "", cluster.ProviderConfigName, k.d.URI("test"))
	if err := cluster.Apply(ctx, kb.Client, pc); err != nil {
		return nil, err
	}
	return &env{cfg: kb.Config, client: kb.Client, kubeconfig: kb.Kubeconfig, hosts: hosts, opsAreRequests: true}, nil
}

// addPool defines and starts a pool in the test driver, with the base volume.
func (k *kvmBench) addPool(name string) error {
	x := fmt.Sprintf(`<pool type='dir'><name>%[1]s</name><target><path>/bench/%[1]s</path></target></pool>`, name)
	p, err := k.l.StoragePoolDefineXML(x, 0)
	if err != nil {
		return errors.Wrapf(err, "cannot define pool %s", name)
	}
	if err := k.l.StoragePoolCreate(p, 0); err != nil {
		return errors.Wrapf(err, "cannot start pool %s", name)
	}
	base := `<volume><name>` + kvmBase + `</name><capacity unit='bytes'>1073741824</capacity><target><format type='qcow2'/></target></volume>`
	_, err = k.l.StorageVolCreateXML(p, base, 0)
	return errors.Wrapf(err, "cannot create the base volume in pool %s", name)
}

func (k *kvmBench) stop() {
	if k.kube != nil {
		k.kube.Stop()
	}
	if k.t != nil {
		k.t.RunCleanups()
	}
}

func (k *kvmBench) mr(i int) *unstructured.Unstructured {
	name := fmt.Sprintf("bench-%04d", i)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kvmv1alpha1.SchemeGroupVersion.String(),
		"kind":       "KVMProxy",
		"metadata":   map[string]any{"name": name, "namespace": mrNamespace},
		"spec": map[string]any{
			"forProvider": map[string]any{
				"pool":                kvmPool("bench", i),
				"baseImageVolume":     kvmBase,
				"diskGiB":             int64(1),
				"memoryMiB":           int64(256),
				"vcpus":               int64(1),
				"network":             map[string]any{"name": kvmNetwork},
				"domainType":          "qemu",
				"allowedClientCIDRs":  []any{"10.0.0.0/8"},
				"allowedDestinations": []any{"api.example.com", ".example.org"},
			},
			"providerConfigRef":          map[string]any{"kind": "ClusterProviderConfig", "name": cluster.ProviderConfigName},
			"writeConnectionSecretToRef": map[string]any{"name": name + "-proxy"},
		},
	}}
}

func (k *kvmBench) backendCounts() counts { return nil }

// baseline creates, per MR, an overlay volume on the base, a seed volume
// (the test driver cannot upload, as for the provider), and defines and
// starts a domain, with go-libvirt on a connection of its own.
func (k *kvmBench) baseline(ctx context.Context, r *runner) (*baselineResult, error) {
	l, err := golibvirt.ConnectToURI(mustURL(k.d.URI("test")))
	if err != nil {
		return nil, errors.Wrap(err, "cannot connect to libvirt")
	}
	defer l.Disconnect() //nolint:errcheck // Best effort.
	cnt := &counter{}
	res := &baselineResult{
		what:       fmt.Sprintf("go-libvirt creates an overlay and a seed volume, defines and starts a domain per MR, %d at a time", r.o.rate),
		readyMeans: "every domain running",
	}
	cpu0, t0 := selfCPU(), time.Now()
	pools := map[string]golibvirt.StoragePool{}
	bases := map[string]string{}
	for i := 0; i < r.o.n; i += perPool {
		name := kvmPool("base", i)
		pool, err := l.StoragePoolLookupByName(name)
		cnt.inc(targetVirt, "StoragePoolLookupByName")
		if err != nil {
			return res, err
		}
		base, err := l.StorageVolLookupByName(pool, kvmBase)
		cnt.inc(targetVirt, "StorageVolLookupByName")
		if err != nil {
			return res, err
		}
		pools[name], bases[name] = pool, base.Key
	}
	err = parallel(ctx, r.o.n, r.o.rate, func(_ context.Context, i int) error {
		p := kvmPool("base", i)
		return defineDomain(l, cnt, pools[p], bases[p], fmt.Sprintf("base-%04d", i))
	})
	res.exist = time.Since(t0)
	if err != nil {
		res.requests = cnt.snapshot()
		return res, err
	}
	err = parallel(ctx, r.o.n, r.o.rate, func(_ context.Context, i int) error {
		d, err := l.DomainLookupByName(fmt.Sprintf("base-%04d", i))
		cnt.inc(targetVirt, "DomainLookupByName")
		if err != nil {
			return err
		}
		st, _, err := l.DomainGetState(d, 0)
		cnt.inc(targetVirt, "DomainGetState")
		if err == nil && golibvirt.DomainState(st) != golibvirt.DomainRunning {
			err = errors.Errorf("domain %s is not running", d.Name)
		}
		return err
	})
	res.ready, res.cpu, res.requests = time.Since(t0), selfCPU()-cpu0, cnt.snapshot()
	return res, err
}

func defineDomain(l *golibvirt.Libvirt, cnt *counter, pool golibvirt.StoragePool, baseKey, name string) error {
	overlay := fmt.Sprintf(`<volume><name>%s.qcow2</name><capacity unit='GiB'>1</capacity><target><format type='qcow2'/></target>`+
		`<backingStore><path>%s</path><format type='qcow2'/></backingStore></volume>`, name, baseKey)
	_, err := l.StorageVolCreateXML(pool, overlay, 0)
	cnt.inc(targetVirt, "StorageVolCreateXML")
	if err != nil {
		return errors.Wrap(err, "cannot create an overlay")
	}
	seed := fmt.Sprintf(`<volume><name>%s-seed.iso</name><capacity unit='bytes'>1048576</capacity><target><format type='raw'/></target></volume>`, name)
	_, err = l.StorageVolCreateXML(pool, seed, 0)
	cnt.inc(targetVirt, "StorageVolCreateXML")
	if err != nil {
		return errors.Wrap(err, "cannot create a seed volume")
	}
	dom := fmt.Sprintf(`<domain type='qemu'><name>%[1]s</name><memory unit='MiB'>128</memory><vcpu>1</vcpu>`+
		`<os><type arch='x86_64'>hvm</type></os><devices>`+
		`<disk type='volume' device='disk'><source pool='%[2]s' volume='%[1]s.qcow2'/><target dev='vda' bus='virtio'/></disk>`+
		`<disk type='volume' device='cdrom'><source pool='%[2]s' volume='%[1]s-seed.iso'/><target dev='sda' bus='sata'/><readonly/></disk>`+
		`<interface type='network'><source network='%[3]s'/><model type='virtio'/></interface></devices></domain>`, name, pool.Name, kvmNetwork)
	d, err := l.DomainDefineXML(dom)
	cnt.inc(targetVirt, "DomainDefineXML")
	if err != nil {
		return errors.Wrap(err, "cannot define a domain")
	}
	err = l.DomainCreate(d)
	cnt.inc(targetVirt, "DomainCreate")
	return errors.Wrap(err, "cannot start a domain")
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		// URI builds it from a socket path: it always parses.
		panic(err)
	}
	return u
}
