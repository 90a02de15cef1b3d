/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/backend/gcp/gcpdesc"
	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/guestimage"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/libvirtd"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/traffic"
)

// BackendGCP is the gcp backend.
const BackendGCP = Backend(gcpdesc.Name)

// Its test double is the GCE fake, whose instances boot real guests where a
// private libvirtd can run.
var _ = registerDouble(BackendGCP, double{
	step: func(c *Cluster) step {
		return step{name: "GCE fake and gcp ProviderConfig", log: "gcp-fake.log", fn: c.setupGCP}
	},
	site: func(c *Cluster) (TrafficSite, bool) {
		if c.GCE == nil || c.GCE.Guests == nil {
			return TrafficSite{}, false
		}
		return TrafficSite{NetNS: c.GCE.Guests.NetNS, ClientCIDR: c.GCE.Guests.Prepared.Subnet.String()}, true
	},
})

// The gcp backend's setup: the GCE fake stands in for Compute Engine.
const (
	// GCPProject is the project the fake serves and the ProviderConfig names.
	GCPProject = "egressproxy-e2e"
	// GCPKeySecret holds a service account key the fake's token endpoint
	// trusts, in CrossplaneNamespace.
	GCPKeySecret = "gcp-fake-key"

	gcpServiceAccount = "provider@egressproxy-e2e.iam.gserviceaccount.com"

	errGCEURL      = "the GCE fake did not print its URL"
	errFmtAdmin    = "the GCE fake's admin endpoint %s answered %s: %s"
	errAdminCall   = "cannot call the GCE fake's admin endpoint"
	errGCPKey      = "cannot get a service account key from the GCE fake"
	errGCPKeyStore = "cannot store the GCE fake's service account key"
	errFmtGuests   = "cannot set up the GCE fake's libvirt sandbox: %s"
)

// GCE is a running GCE fake.
type GCE struct {
	// URL is the fake's address on the host (Admin); PodURL where the
	// provider's pods reach it, as ProviderConfig spec.endpoint.
	URL, PodURL string
	// Guests is where the fake runs a real guest for every RUNNING
	// instance (package guestvm), or nil: NoGuests then says why, and the
	// fake simulates the guests' reports instead.
	Guests   *GCEGuests
	NoGuests string
}

// GCEGuests is the GCE fake's own private libvirtd: the guests of its
// instances run there, apart from the kvm backend's sandbox, as GCE's VMs
// are apart from a platform team's hosts.
type GCEGuests struct {
	Daemon   *libvirtd.Daemon
	Prepared libvirtd.Prepared
	// NetNS is the path of the sandbox's network namespace: the guests'
	// network, their external IPs (a DNAT to each guest, as GCE's 1:1 NAT),
	// and package traffic's addresses, where a client and an origin run.
	NetNS string
	// Image is the guest image the instances boot.
	Image string
}

// Admin calls the fake's admin endpoint (see internal/gcpfake/admin.go):
// method and path such as "POST", "/_fake/faults/operation", with a JSON
// body, or nil. It returns the response body.
func (g *GCE) Admin(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(g.URL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, errors.Wrap(err, errAdminCall)
	}
	req.Header.Set("Content-Type", "application/json")
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, errors.Wrap(err, errAdminCall)
	}
	defer rsp.Body.Close() //nolint:errcheck // Read to the end below.
	b, err := io.ReadAll(rsp.Body)
	if err != nil {
		return nil, errors.Wrap(err, errAdminCall)
	}
	if rsp.StatusCode/100 != 2 {
		return b, errors.Errorf(errFmtAdmin, path, rsp.Status, strings.TrimSpace(string(b)))
	}
	return b, nil
}

// setupGCP starts the GCE fake, which asks for a bearer token like Compute
// Engine, stores a service account key it trusts, and creates the gcp
// backend's ClusterProviderConfig default.
//
// Where a private libvirtd can run, every RUNNING instance gets a real guest
// (the guest image, its user-data and startup-script) and Ready comes from
// that guest's report; elsewhere the fake simulates the reports.
func (c *Cluster) setupGCP(ctx context.Context) error {
	args := []string{"--address=127.0.0.1:0", "--project=" + GCPProject, "--require-auth"}
	guests, noGuests, err := c.gceGuests()
	if err != nil {
		return err
	}
	if guests != nil {
		args = append(args, "--guest-libvirt-uri="+guests.Daemon.URI("qemu"), "--guest-netns="+guests.NetNS,
			"--guest-network="+guests.Prepared.Network.Name, "--guest-dir="+guests.Prepared.PoolPath,
			"--guest-image="+guests.Image, fmt.Sprintf("--guest-memory=%d", guestimage.RecommendedMemoryMiB))
	} else {
		c.logf("the GCE fake simulates its guests: %s", noGuests)
	}
	p, err := c.sup.start("gcp-fake", c.Bin.GCEFake, args, nil)
	if err != nil {
		return err
	}
	var u string
	if err := c.waitFor(ctx, p, 30*time.Second, errGCEURL, func(context.Context) (bool, error) {
		u = firstURL(p.Log)
		return u != "", nil
	}); err != nil {
		return err
	}
	c.GCE = &GCE{URL: u, Guests: guests, NoGuests: noGuests}
	key, err := c.GCE.Admin(ctx, http.MethodPost, "/_fake/keys?email="+url.QueryEscape(gcpServiceAccount), nil)
	if err != nil {
		return errors.Wrap(err, errGCPKey)
	}
	// The provider's pods reach the fake, which runs on the host, over
	// TLS at the node's address (the provider sends tokens over https
	// only, but to loopback), as a private endpoint: its CA is a ConfigMap
	// the provider's DeploymentRuntimeConfig mounts and names in
	// SSL_CERT_FILE. The endpoint and the key's token_uri name it.
	hostAddr := strings.TrimPrefix(strings.TrimSuffix(u, "/"), "http://")
	podAddr, caPEM, err := c.tlsFront(hostAddr)
	if err != nil {
		return err
	}
	c.GCE.PodURL = "https://" + podAddr
	key = []byte(strings.ReplaceAll(string(key), "http://"+hostAddr, c.GCE.PodURL))
	if err := c.trustEndpointCA(ctx, caPEM); err != nil {
		return err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: CrossplaneNamespace, Name: GCPKeySecret},
		Data:       map[string][]byte{"credentials.json": key},
	}
	if err := c.Client.Create(ctx, s); client.IgnoreAlreadyExists(err) != nil {
		return errors.Wrap(err, errGCPKeyStore)
	}
	return Apply(ctx, c.Client, GCPProviderConfig("ClusterProviderConfig", "", ProviderConfigName, c.GCE.PodURL))
}

// gceGuests starts the GCE fake's private libvirtd, with package traffic's
// addresses in its network namespace. It returns nil and why when none can
// run here.
func (c *Cluster) gceGuests() (g *GCEGuests, why string, err error) {
	if why := needsRoot(); why != "" {
		return nil, why, nil
	}
	t := testenv.NewOutside("cluster", c.logf)
	defer func() {
		if errors.Is(err, ErrMissing) {
			g, why, err = nil, err.Error(), nil
		}
	}()
	defer c.recoverOutside(t, &err, errFmtGuests)
	image := guestimage.Path(t)
	d := libvirtd.Start(t)
	// The sandbox is no child of this process: if this one dies, the
	// watchdog stops the sandbox.
	c.sup.onAbort(shellQuote(filepath.Join(testenv.RepoRoot(), "hack", "libvirt-sandbox.sh")) + " stop " + shellQuote(d.Base))
	c.sup.removeOnAbort(d.Base)
	g = &GCEGuests{Daemon: d, Prepared: d.Prepare(t, libvirtd.PrepareOptions{}), NetNS: d.NetNS(t), Image: image}
	if err := traffic.AddAddresses(g.NetNS, traffic.AllowedOrigin, traffic.OtherOrigin, traffic.StableOrigin, traffic.OutsideClient); err != nil {
		return nil, "", err
	}
	return g, "", nil
}

// GCPProviderConfig returns a (Cluster)ProviderConfig of the gcp backend
// for the fake at endpoint, with the key Secret in CrossplaneNamespace (a
// ProviderConfig reads it from its own namespace).
func GCPProviderConfig(kind, namespace, name, endpoint string) *unstructured.Unstructured {
	ref := map[string]any{"name": GCPKeySecret, "key": "credentials.json"}
	if kind == "ClusterProviderConfig" {
		ref["namespace"] = CrossplaneNamespace
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gcp.m.egressproxy.io/v1alpha1",
		"kind":       kind,
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"projectID":   GCPProject,
			"endpoint":    endpoint,
			"credentials": map[string]any{"source": "Secret", "secretRef": ref},
		},
	}}
	if namespace != "" {
		u.SetNamespace(namespace)
	}
	return u
}

// firstURL returns the first line of a log that is a URL: the GCE fake
// prints the one it serves on.
func firstURL(log string) string {
	f, err := os.Open(log) //nolint:gosec // A log this package writes.
	if err != nil {
		return ""
	}
	defer f.Close() //nolint:errcheck // Read only.
	s := bufio.NewScanner(f)
	for s.Scan() {
		if l := strings.TrimSpace(s.Text()); strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://") {
			return l
		}
	}
	return ""
}
