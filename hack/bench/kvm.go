/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	golibvirt "github.com/digitalocean/go-libvirt"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kvmv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kvm/v1alpha1"
	kvmbackend "github.com/egressproxy/provider-egressproxy/internal/backend/kvm"
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

var _ = registerBench(cluster.BackendKVM, func() bench { return &kvmBench{} })

// kvmBench runs KVMProxy against the test driver of a private libvirtd:
// real RPCs, no VMs. Its state lives while a connection is open, so the
// bench holds one for the whole run.
type kvmBench struct {
	kube *kube.Env
	t    *testenv.Outside
	l    *golibvirt.Libvirt
	d    *libvirtd.Daemon
	rpcs *rpcCounter
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
	// The provider reaches libvirtd through a relay that counts its RPCs.
	// Its own short folder: a socket path must fit in sun_path.
	dir, err := os.MkdirTemp("", "bench-virt")
	if err != nil {
		return nil, errors.Wrap(err, "cannot create the relay's folder")
	}
	k.t.Cleanup(func() { _ = os.RemoveAll(dir) })
	relay := filepath.Join(dir, "sock")
	if k.rpcs, err = startRPCCounter(relay, k.d.Socket); err != nil {
		return nil, err
	}
	uri := (&url.URL{Scheme: "test+unix", Path: "/default", RawQuery: url.Values{"socket": {relay}}.Encode()}).String()
	pc := cluster.KVMProviderConfig("ClusterProviderConfig", "", cluster.ProviderConfigName, uri)
	// The policy allows only the "default" pool unless it lists others.
	var pools []any
	for i := 0; i < r.o.n; i += perPool {
		pools = append(pools, kvmPool("bench", i))
	}
	if err := unstructured.SetNestedSlice(pc.Object, pools, "spec", "policy", "kvm", "pools"); err != nil {
		return nil, err
	}
	if err := cluster.Apply(ctx, kb.Client, pc); err != nil {
		return nil, err
	}
	return &env{cfg: kb.Config, client: kb.Client, kubeconfig: kb.Kubeconfig, hosts: hosts}, nil
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
	if k.rpcs != nil {
		k.rpcs.close()
	}
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

// backendCounts are the provider's libvirt RPCs, by procedure, as the relay
// saw them.
func (k *kvmBench) backendCounts() counts {
	if k.rpcs == nil {
		return nil
	}
	return k.rpcs.cnt.snapshot()
}

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

// libvirt's RPC programs (remote_protocol.x, qemu_protocol.x, keepalive).
const (
	progRemote    = 0x20008086
	progQEMU      = 0x20008087
	progKeepalive = 0x6b656570
	callMessage   = 0  // VIR_NET_CALL
	rpcHeaderLen  = 28 // length, program, version, procedure, type, serial, status
	maxRPCPacket  = 32 << 20
)

// remoteProcs names the remote procedures the provider calls.
var remoteProcs = map[uint32]string{
	1: "ConnectOpen", 2: "ConnectClose", 3: "ConnectGetType", 4: "ConnectGetVersion",
	9: "DomainCreate", 11: "DomainDefineXML", 12: "DomainDestroy", 14: "DomainGetXMLDesc",
	23: "DomainLookupByName", 60: "ConnectSupportsFeature", 66: "AuthList",
	83: "StoragePoolRefresh", 84: "StoragePoolLookupByName", 93: "StorageVolCreateXML",
	94: "StorageVolDelete", 95: "StorageVolLookupByName", 98: "StorageVolGetInfo",
	99: "StorageVolGetXMLDesc", 157: "ConnectGetLibVersion", 196: "DomainCreateWithFlags",
	208: "StorageVolUpload", 212: "DomainGetState", 231: "DomainUndefineFlags",
	273: "ConnectListAllDomains", 281: "ConnectListAllStoragePools", 282: "StoragePoolListAllVolumes",
	344: "ConnectGetAllDomainStats", 350: "DomainDefineXMLFlags", 353: "DomainInterfaceAddresses",
	360: "ConnectRegisterCloseCallback", 361: "ConnectUnregisterCloseCallback",
}

// rpcCounter relays connections on a unix socket to libvirtd's and counts
// the calls clients send, by procedure: the provider has no RPC metrics of
// its own (egressproxy_backend_calls_total counts operations).
type rpcCounter struct {
	ln     net.Listener
	daemon string
	cnt    counter
}

func startRPCCounter(path, daemon string) (*rpcCounter, error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, errors.Wrap(err, "cannot listen for the libvirt relay")
	}
	c := &rpcCounter{ln: ln, daemon: daemon}
	go func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			go c.relay(down)
		}
	}()
	return c, nil
}

func (c *rpcCounter) close() { _ = c.ln.Close() }

func (c *rpcCounter) relay(down net.Conn) {
	defer down.Close() //nolint:errcheck // Best effort.
	up, err := net.Dial("unix", c.daemon)
	if err != nil {
		return
	}
	defer up.Close() //nolint:errcheck // Best effort.
	go func() {
		_, _ = io.Copy(down, up)
		_ = down.Close()
	}()
	c.forward(bufio.NewReader(down), up)
}

// forward copies the client's packets to up, counting every call.
func (c *rpcCounter) forward(r *bufio.Reader, up io.Writer) {
	for {
		var size [4]byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(size[:])
		if n < rpcHeaderLen || n > maxRPCPacket {
			return
		}
		pkt := make([]byte, n)
		copy(pkt, size[:])
		if _, err := io.ReadFull(r, pkt[4:]); err != nil {
			return
		}
		prog, proc, typ := binary.BigEndian.Uint32(pkt[4:]), binary.BigEndian.Uint32(pkt[12:]), binary.BigEndian.Uint32(pkt[16:])
		if typ == callMessage && prog != progKeepalive {
			c.cnt.inc(targetVirt, procName(prog, proc))
		}
		if _, err := up.Write(pkt); err != nil {
			return
		}
	}
}

func procName(prog, proc uint32) string {
	switch {
	case prog == progQEMU && proc == 3:
		return "QEMUDomainAgentCommand"
	case prog == progRemote && remoteProcs[proc] != "":
		return remoteProcs[proc]
	}
	return fmt.Sprintf("program %#x procedure %s", prog, strconv.FormatUint(uint64(proc), 10))
}

// dataPlane: the VM's squid writes its access log to a file and to syslog
// (the journal), which journalctl hands to squid.TrafficAWK; squid runs as
// Debian's squid.service starts it.
func (*kvmBench) dataPlane() dataPlane {
	return dataPlane{config: kvmbackend.DataPlaneConfig, accessLog: accessLogFile, args: []string{"--foreground", "-sYC"}}
}
