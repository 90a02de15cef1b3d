/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	gcpv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	gcpbackend "github.com/egressproxy/provider-egressproxy/internal/backend/gcp"
	"github.com/egressproxy/provider-egressproxy/internal/gcpfake"
	"github.com/egressproxy/provider-egressproxy/internal/gcpfake/proxyguest"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

const (
	gcpZone         = "europe-west1-b"
	gcpRegion       = "europe-west1"
	gcpMachineType  = "e2-small"
	gcpImage        = "projects/debian-cloud/global/images/family/debian-12"
	gcpSA           = "provider@egressproxy-e2e.iam.gserviceaccount.com"
	targetGCE       = "GCE"
	envStartTimeout = "KUBEBUILDER_CONTROLPLANE_START_TIMEOUT"
	// benchAddresses is where the fake reserves the proxies' static
	// addresses: its default /24 holds 253, and N may be 1000 (RFC 2544's
	// benchmarking range reaches no real host either).
	benchAddresses = "198.18.0.0/15"
)

var _ = registerBench(cluster.BackendGCP, func() bench { return &gcpBench{} })

// gcpBench runs GCPProxy against the project's GCE fake, in this process:
// the fake counts every request by API method.
type gcpBench struct {
	kube *kube.Env
	fake *gcpfake.Server
}

func (g *gcpBench) gvk() schema.GroupVersionKind {
	return gcpv1alpha1.SchemeGroupVersion.WithKind("GCPProxy")
}

// startKube starts kube-apiserver and etcd with the provider's CRDs; the
// GCE and libvirt backends need no more.
func startKube() (*kube.Env, map[string]string, error) {
	// envtest gives kube-apiserver 20 s, too short on two busy cores.
	if os.Getenv(envStartTimeout) == "" {
		_ = os.Setenv(envStartTimeout, "90s")
	}
	if kube.BinDir() == "" {
		return nil, nil, errors.Wrap(errMissing, "the envtest binaries are not built (hack/tools.sh build etcd kube-apiserver)")
	}
	e, err := kube.New()
	if err != nil {
		return nil, nil, err
	}
	u, err := url.Parse(e.Config.Host)
	if err != nil {
		e.Stop()
		return nil, nil, errors.Wrap(err, "cannot parse the apiserver's URL")
	}
	return e, map[string]string{u.Host: controlPlane}, nil
}

func (g *gcpBench) start(ctx context.Context, _ *runner) (*env, error) {
	k, hosts, err := startKube()
	if err != nil {
		return nil, err
	}
	g.kube = k
	g.fake = gcpfake.New(gcpfake.WithProjects(cluster.GCPProject), gcpfake.WithRequireAuth(), gcpfake.WithStaticAddressRange(benchAddresses))
	if err := g.fake.Start(); err != nil {
		return nil, err
	}
	// No VM runs here: stand in for every guest's serving report.
	go proxyguest.Run(ctx, g.fake, proxyguest.DefaultEvery)
	key, err := g.fake.NewServiceAccountKey(gcpSA)
	if err != nil {
		return nil, err
	}
	if err := ensureNamespace(ctx, k.Client, cluster.CrossplaneNamespace); err != nil {
		return nil, err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.CrossplaneNamespace, Name: cluster.GCPKeySecret},
		Data:       map[string][]byte{"credentials.json": key},
	}
	if err := k.Client.Create(ctx, s); err != nil {
		return nil, errors.Wrap(err, "cannot create the key Secret")
	}
	pc := cluster.GCPProviderConfig("ClusterProviderConfig", "", cluster.ProviderConfigName, g.fake.URL())
	if err := cluster.Apply(ctx, k.Client, pc); err != nil {
		return nil, err
	}
	return &env{cfg: k.Config, client: k.Client, kubeconfig: k.Kubeconfig, hosts: hosts}, nil
}

func (g *gcpBench) stop() {
	if g.fake != nil {
		g.fake.Close()
	}
	if g.kube != nil {
		g.kube.Stop()
	}
}

func (g *gcpBench) mr(i int) *unstructured.Unstructured {
	name := fmt.Sprintf("bench-%04d", i)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gcpv1alpha1.SchemeGroupVersion.String(),
		"kind":       "GCPProxy",
		"metadata":   map[string]any{"name": name, "namespace": mrNamespace},
		"spec": map[string]any{
			"forProvider": map[string]any{
				"zone":                gcpZone,
				"machineType":         gcpMachineType,
				"network":             "default",
				"allowedClientCIDRs":  []any{"10.0.0.0/8"},
				"allowedDestinations": []any{"api.example.com", ".example.org"},
			},
			"providerConfigRef":          map[string]any{"kind": "ClusterProviderConfig", "name": cluster.ProviderConfigName},
			"writeConnectionSecretToRef": map[string]any{"name": name + "-proxy"},
		},
	}}
}

// backendCounts are the fake's counts by API method: the provider's
// compute client has no metrics of its own.
func (g *gcpBench) backendCounts() counts { return gceCounts(g.fake) }

func gceCounts(s *gcpfake.Server) counts {
	c := counts{}
	for call, n := range s.CallCounts() {
		c[reqKey{target: targetGCE, verb: strings.TrimPrefix(call, "compute.")}] += float64(n)
	}
	return c
}

// baseline inserts, per MR, an address, a firewall rule and an instance
// with the compute client, against a fake of its own, waiting for each
// operation, then reads every instance until it is RUNNING.
func (g *gcpBench) baseline(ctx context.Context, r *runner) (*baselineResult, error) {
	f := gcpfake.New(gcpfake.WithProjects(cluster.GCPProject), gcpfake.WithStaticAddressRange(benchAddresses))
	if err := f.Start(); err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := newGCEClients(ctx, f)
	if err != nil {
		return nil, err
	}
	defer c.close()
	res := &baselineResult{
		what:       fmt.Sprintf("the compute client inserts an address, reads it, inserts a firewall rule and an instance per MR, waiting for each operation, %d at a time", r.o.rate),
		readyMeans: "every instance RUNNING",
	}
	cpu0, t0 := selfCPU(), time.Now()
	if err := parallel(ctx, r.o.n, r.o.rate, func(ctx context.Context, i int) error {
		return c.insert(ctx, fmt.Sprintf("base-%04d", i))
	}); err != nil {
		res.requests = gceCounts(f)
		return res, err
	}
	res.exist = time.Since(t0)
	err = parallel(ctx, r.o.n, r.o.rate, func(ctx context.Context, i int) error {
		return c.waitRunning(ctx, fmt.Sprintf("base-%04d", i), t0.Add(r.o.timeout))
	})
	res.ready, res.cpu, res.requests = time.Since(t0), selfCPU()-cpu0, gceCounts(f)
	return res, err
}

type gceClients struct {
	addresses *compute.AddressesClient
	firewalls *compute.FirewallsClient
	instances *compute.InstancesClient
}

func newGCEClients(ctx context.Context, f *gcpfake.Server) (*gceClients, error) {
	c := &gceClients{}
	var err error
	if c.addresses, err = compute.NewAddressesRESTClient(ctx, f.ClientOptions()...); err != nil {
		return nil, err
	}
	if c.firewalls, err = compute.NewFirewallsRESTClient(ctx, f.ClientOptions()...); err != nil {
		return nil, err
	}
	c.instances, err = compute.NewInstancesRESTClient(ctx, f.ClientOptions()...)
	return c, err
}

func (c *gceClients) close() {
	_ = c.addresses.Close()
	_ = c.firewalls.Close()
	_ = c.instances.Close()
}

func (c *gceClients) insert(ctx context.Context, name string) error {
	p := cluster.GCPProject
	op, err := c.addresses.Insert(ctx, &computepb.InsertAddressRequest{Project: p, Region: gcpRegion,
		AddressResource: &computepb.Address{Name: ptr.To(name), AddressType: ptr.To("EXTERNAL")}})
	if err == nil {
		err = op.Wait(ctx)
	}
	if err != nil {
		return errors.Wrap(err, "cannot insert an address")
	}
	a, err := c.addresses.Get(ctx, &computepb.GetAddressRequest{Project: p, Region: gcpRegion, Address: name})
	if err != nil {
		return errors.Wrap(err, "cannot get an address")
	}
	network := "projects/" + p + "/global/networks/default"
	op, err = c.firewalls.Insert(ctx, &computepb.InsertFirewallRequest{Project: p, FirewallResource: &computepb.Firewall{
		Name: ptr.To(name), Network: ptr.To(network), Direction: ptr.To("INGRESS"),
		Allowed:      []*computepb.Allowed{{IPProtocol: ptr.To("tcp"), Ports: []string{"3128"}}},
		SourceRanges: []string{"10.0.0.0/8"}, TargetTags: []string{name},
	}})
	if err == nil {
		err = op.Wait(ctx)
	}
	if err != nil {
		return errors.Wrap(err, "cannot insert a firewall rule")
	}
	op, err = c.instances.Insert(ctx, &computepb.InsertInstanceRequest{Project: p, Zone: gcpZone, InstanceResource: &computepb.Instance{
		Name:        ptr.To(name),
		MachineType: ptr.To("zones/" + gcpZone + "/machineTypes/" + gcpMachineType),
		Disks: []*computepb.AttachedDisk{{Boot: ptr.To(true), AutoDelete: ptr.To(true),
			InitializeParams: &computepb.AttachedDiskInitializeParams{SourceImage: ptr.To(gcpImage), DiskSizeGb: ptr.To[int64](10)}}},
		NetworkInterfaces: []*computepb.NetworkInterface{{Network: ptr.To(network),
			AccessConfigs: []*computepb.AccessConfig{{Name: ptr.To("External NAT"), Type: ptr.To("ONE_TO_ONE_NAT"), NatIP: ptr.To(a.GetAddress())}}}},
		Tags:     &computepb.Tags{Items: []string{name}},
		Metadata: &computepb.Metadata{Items: []*computepb.Items{{Key: ptr.To("user-data"), Value: ptr.To(baselineSquidConf)}}},
	}})
	if err == nil {
		err = op.Wait(ctx)
	}
	return errors.Wrap(err, "cannot insert an instance")
}

func (c *gceClients) waitRunning(ctx context.Context, name string, deadline time.Time) error {
	for time.Now().Before(deadline) {
		i, err := c.instances.Get(ctx, &computepb.GetInstanceRequest{Project: cluster.GCPProject, Zone: gcpZone, Instance: name})
		if err == nil && i.GetStatus() == "RUNNING" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return errors.Errorf("instance %s did not become RUNNING", name)
}

// faults: a storm, every compute call failing for -fault-for, reads with
// 503 backendError (which the compute client retries by itself until its
// deadline) and the rest with 429 rateLimitExceeded.
func (g *gcpBench) faults() []fault {
	return []fault{{
		name:   "GCE 429/503 storm",
		target: targetGCE,
		begin: func() error {
			g.fake.InjectError(gcpfake.ErrorFault{Match: gcpfake.Match{Method: http.MethodGet}, Code: http.StatusServiceUnavailable})
			g.fake.InjectError(gcpfake.ErrorFault{Code: http.StatusTooManyRequests})
			return nil
		},
		end: func() error { g.fake.ClearFaults(); return nil },
	}}
}

// dataPlane: the VM's squid writes its access log to a file and to syslog
// (the journal), which journalctl hands to squid.TrafficAWK; squid runs as
// Debian's squid.service starts it.
func (*gcpBench) dataPlane() dataPlane {
	return dataPlane{config: gcpbackend.DataPlaneConfig, accessLog: accessLogFile, args: []string{"--foreground", "-sYC"}}
}
