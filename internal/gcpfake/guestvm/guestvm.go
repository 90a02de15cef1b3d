/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package guestvm gives the instances of a GCE fake real guests: while an
// instance is RUNNING, a QEMU/TCG VM of the project's guest image
// (hack/guest-image.sh) runs it on a private libvirtd, with the instance's
// user-data and startup-script, and the fake's metadata server answers it.
// It stands in for three parts of Compute Engine:
//   - The guest agent, which runs startup-script at every boot: a NoCloud
//     seed carries the user-data, and a vendor-data that installs the
//     startup-script with a unit running it at every boot (VendorData).
//   - The metadata server: one listener on 169.254.169.254:80 on the
//     libvirt network's bridge, which answers each guest, known by its
//     source address, with the fake's MetadataServer for its instance.
//   - The external IP, a 1:1 NAT on GCE: an nftables DNAT from the
//     instance's natIP to the guest's DHCP lease, with a route to it, in
//     the libvirt network's namespace. A client there reaches the guest at
//     the address the fake (and so the claim's connection Secret) names.
//
// Everything lives in the libvirt sandbox's network namespace: no packet
// reaches the host's network.
package guestvm

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	golibvirt "github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/egressproxy/provider-egressproxy/internal/gcpfake"
	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/libvirtd"
)

// GCE's well-known metadata keys a guest reads.
const (
	keyUserData      = "user-data"
	keyStartupScript = "startup-script"
)

const (
	errConnect     = "cannot connect to libvirt"
	errNetwork     = "cannot read the libvirt network"
	errMetadata    = "cannot serve the metadata server in the network namespace"
	errFmtNetNS    = "%s in the network namespace: %s"
	errFmtGuest    = "cannot start the guest of instance %s"
	errFmtStop     = "cannot remove the guest of instance %s"
	errReadImage   = "cannot read the guest image"
	errCopyImage   = "cannot copy the guest image"
	errFmtSelf     = "cannot read project and zone from %q"
	errFmtNoBridge = "libvirt network %s has no bridge or no address"
	defaultMemory  = 512

	// every is how often the runner looks at the fake's instances.
	every = time.Second
	// nftTable holds the external IPs' NAT.
	nftTable = "gcpfake"
)

// Config says where the guests run.
type Config struct {
	// URI reaches the libvirtd that runs the guests (qemu+unix://...).
	URI string
	// NetNS is the path of the network namespace the libvirt network's
	// bridge lives in (the sandbox's).
	NetNS string
	// Network is the libvirt (NAT) network of the guests' NICs.
	Network string
	// Dir holds each guest's disk, seed and console log; QEMU reads it.
	Dir string
	// Image is the guest image hack/guest-image.sh builds.
	Image string
	// MemoryMiB of each guest; 512 when zero.
	MemoryMiB uint
	// Logf reports what the runner does; nothing is reported when nil.
	Logf func(format string, args ...any)
}

// A Runner runs a guest for every RUNNING instance of a fake.
type Runner struct {
	cfg     Config
	s       *gcpfake.Server
	l       *golibvirt.Libvirt
	bridge  string
	gateway netip.Addr
	srv     *http.Server

	mu     sync.Mutex
	guests map[uint64]*guest // by instance ID
}

// A guest is the VM of one instance.
type guest struct {
	id                  uint64
	project, zone, name string
	domain, mac         string
	// ip is the guest's lease, natIP the instance's external address:
	// both set once the DNAT is in place.
	ip, natIP netip.Addr
	metadata  http.Handler
	files     []string
}

// Start connects to libvirt and serves the metadata server on the
// network's bridge. Run then runs the guests.
func Start(s *gcpfake.Server, cfg Config) (*Runner, error) {
	if cfg.MemoryMiB == 0 {
		cfg.MemoryMiB = defaultMemory
	}
	u, err := url.Parse(cfg.URI)
	if err != nil {
		return nil, errors.Wrap(err, errConnect)
	}
	l, err := golibvirt.ConnectToURI(u)
	if err != nil {
		return nil, errors.Wrap(err, errConnect)
	}
	r := &Runner{cfg: cfg, s: s, l: l, guests: map[uint64]*guest{}}
	if err := r.readNetwork(); err != nil {
		_ = l.Disconnect()
		return nil, err
	}
	if err := r.serveMetadata(); err != nil {
		_ = l.Disconnect()
		return nil, err
	}
	return r, nil
}

func (r *Runner) readNetwork() error {
	n, err := r.l.NetworkLookupByName(r.cfg.Network)
	if err != nil {
		return errors.Wrap(err, errNetwork)
	}
	desc, err := r.l.NetworkGetXMLDesc(n, 0)
	if err != nil {
		return errors.Wrap(err, errNetwork)
	}
	var x libvirtxml.Network
	if err := x.Unmarshal(desc); err != nil {
		return errors.Wrap(err, errNetwork)
	}
	if x.Bridge == nil || x.Bridge.Name == "" || len(x.IPs) == 0 {
		return errors.Errorf(errFmtNoBridge, r.cfg.Network)
	}
	r.bridge = x.Bridge.Name
	r.gateway, err = netip.ParseAddr(x.IPs[0].Address)
	return errors.Wrap(err, errNetwork)
}

// serveMetadata listens on the metadata server's address on the bridge and
// answers each guest, known by its source address, for its instance.
func (r *Runner) serveMetadata() error {
	if err := r.inNetNS("ip", "addr", "replace", MetadataAddr+"/32", "dev", r.bridge); err != nil {
		return errors.Wrap(err, errMetadata)
	}
	var ln net.Listener
	if err := testenv.InNetNS(r.cfg.NetNS, func() (err error) {
		ln, err = net.Listen("tcp", MetadataAddr+":80")
		return err
	}); err != nil {
		return errors.Wrap(err, errMetadata)
	}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serveGuest), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return nil
}

func (r *Runner) serveGuest(w http.ResponseWriter, req *http.Request) {
	host, _, _ := net.SplitHostPort(req.RemoteAddr)
	src, _ := netip.ParseAddr(host)
	h := r.metadataFor(src.Unmap())
	if h == nil {
		// A guest may ask before the runner saw its lease.
		r.findLeases()
		if h = r.metadataFor(src.Unmap()); h == nil {
			w.Header().Set("Metadata-Flavor", "Google")
			http.Error(w, "Not found.", http.StatusNotFound)
			return
		}
	}
	h.ServeHTTP(w, req)
}

func (r *Runner) metadataFor(ip netip.Addr) http.Handler {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range r.guests {
		if g.ip == ip {
			return g.metadata
		}
	}
	return nil
}

// Run follows the fake's instances until ctx is done, then removes every
// guest and what it set up in the network namespace.
func (r *Runner) Run(ctx context.Context) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		r.sync()
		select {
		case <-ctx.Done():
			r.close()
			return
		case <-t.C:
		}
	}
}

// sync starts a guest for every new RUNNING instance, removes those of
// instances that stopped or are gone, and maps the external IPs of guests
// that got a lease.
func (r *Runner) sync() {
	want := map[uint64]*computepb.Instance{}
	for _, inst := range r.s.Instances() {
		if inst.GetStatus() == "RUNNING" && metadata(inst, keyStartupScript) != "" {
			want[inst.GetId()] = inst
		}
	}
	r.mu.Lock()
	var gone []*guest
	for id, g := range r.guests {
		if want[id] == nil {
			gone = append(gone, g)
			delete(r.guests, id)
		}
	}
	r.mu.Unlock()
	for _, g := range gone {
		if err := r.remove(g); err != nil {
			r.logf(errFmtStop+": %v", g.name, err)
		}
	}
	if len(gone) > 0 {
		r.applyNAT()
	}
	for id, inst := range want {
		r.mu.Lock()
		_, ok := r.guests[id]
		r.mu.Unlock()
		if ok {
			continue
		}
		g, err := r.start(inst)
		if err != nil {
			// Not again: an instance whose guest cannot start never
			// reports, which is what a user sees on GCE too.
			r.logf(errFmtGuest+": %v", inst.GetName(), err)
			g = &guest{id: id, name: inst.GetName()}
		}
		r.mu.Lock()
		r.guests[id] = g
		r.mu.Unlock()
	}
	r.findLeases()
}

// metadataServer is the fake's metadata server for one instance, as long as
// it is the instance of this ID: the guest of an instance that was replaced
// by one of the same name must not report for the new one.
func (r *Runner) metadataServer(id uint64, project, zone, name string) http.Handler {
	h := r.s.MetadataServer(project, zone, name)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if inst, ok := r.s.Instance(project, zone, name); !ok || inst.GetId() != id {
			w.Header().Set("Metadata-Flavor", "Google")
			http.Error(w, "Not found.", http.StatusNotFound)
			return
		}
		h.ServeHTTP(w, req)
	})
}

// start defines and starts the VM of inst. What it made is removed when it
// fails.
func (r *Runner) start(inst *computepb.Instance) (_ *guest, err error) {
	project, zone, ok := projectZone(inst.GetSelfLink())
	if !ok {
		return nil, errors.Errorf(errFmtSelf, inst.GetSelfLink())
	}
	id := inst.GetId()
	g := &guest{
		id: id, project: project, zone: zone, name: inst.GetName(),
		domain:   fmt.Sprintf("gce-%s-%d", inst.GetName(), id),
		mac:      fmt.Sprintf("52:54:00:%02x:%02x:%02x", byte(id>>16), byte(id>>8), byte(id)),
		metadata: r.metadataServer(id, project, zone, inst.GetName()),
	}
	m := Machine{
		Name:      g.domain,
		Disk:      filepath.Join(r.cfg.Dir, g.domain+".qcow2"),
		Seed:      filepath.Join(r.cfg.Dir, g.domain+"-seed.iso"),
		Console:   filepath.Join(r.cfg.Dir, g.domain+"-console.log"),
		Network:   r.cfg.Network,
		MAC:       g.mac,
		MemoryMiB: r.cfg.MemoryMiB,
	}
	g.files = []string{m.Disk, m.Seed}
	defer func() {
		if err != nil {
			_ = r.remove(g)
		}
	}()
	if err := copyFile(r.cfg.Image, m.Disk); err != nil {
		return nil, err
	}
	seed, err := Seed(g.domain, metadata(inst, keyUserData), VendorData(metadata(inst, keyStartupScript)))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(m.Seed, seed, 0o644); err != nil { //nolint:gosec // QEMU reads it.
		return nil, errors.Wrap(err, errSeed)
	}
	x, err := Domain(m).Marshal()
	if err != nil {
		return nil, err
	}
	dom, err := r.l.DomainDefineXML(x)
	if err != nil {
		return nil, err
	}
	if err := r.l.DomainCreate(dom); err != nil {
		return nil, err
	}
	r.logf("instance %s (%d): guest %s started", g.name, id, g.domain)
	return g, nil
}

// remove destroys and undefines the VM and deletes its disk and seed; the
// console log stays, for whoever looks into a failure.
func (r *Runner) remove(g *guest) error {
	if g.domain == "" {
		return nil
	}
	err := libvirtd.RemoveDomain(r.l, g.domain)
	for _, f := range g.files {
		_ = os.Remove(f)
	}
	if g.natIP.IsValid() {
		_ = r.inNetNS("ip", "route", "del", g.natIP.String()+"/32", "dev", r.bridge)
	}
	r.logf("instance %s (%d): guest %s removed", g.name, g.id, g.domain)
	return err
}

// findLeases maps the external IP of every guest that got its lease.
func (r *Runner) findLeases() {
	r.mu.Lock()
	var pending []*guest
	for _, g := range r.guests {
		if g.domain != "" && !g.ip.IsValid() {
			pending = append(pending, g)
		}
	}
	r.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	n, err := r.l.NetworkLookupByName(r.cfg.Network)
	if err != nil {
		return
	}
	leases, _, err := r.l.NetworkGetDhcpLeases(n, nil, 1, 0)
	if err != nil {
		return
	}
	changed := false
	for _, g := range pending {
		inst, ok := r.s.Instance(g.project, g.zone, g.name)
		if !ok || inst.GetId() != g.id {
			continue
		}
		nat, _ := netip.ParseAddr(natIP(inst))
		for _, l := range leases {
			ip, err := netip.ParseAddr(l.Ipaddr)
			if err != nil || len(l.Mac) == 0 || !strings.EqualFold(l.Mac[0], g.mac) {
				continue
			}
			if nat.IsValid() {
				if err := r.inNetNS("ip", "route", "replace", nat.String()+"/32", "dev", r.bridge, "src", r.gateway.String()); err != nil {
					r.logf("instance %s: cannot route its external IP %s: %v", g.name, nat, err)
				}
			}
			r.mu.Lock()
			g.ip, g.natIP = ip, nat
			r.mu.Unlock()
			r.logf("instance %s (%d): guest %s has lease %s, external IP %s", g.name, g.id, g.domain, ip, nat)
			changed = true
		}
	}
	if changed {
		r.applyNAT()
	}
}

// applyNAT replaces the NAT table with the external IPs of the guests.
func (r *Runner) applyNAT() {
	r.mu.Lock()
	external := map[netip.Addr]netip.Addr{}
	for _, g := range r.guests {
		if g.ip.IsValid() && g.natIP.IsValid() {
			external[g.natIP] = g.ip
		}
	}
	r.mu.Unlock()
	if err := r.nft(natRules(external)); err != nil {
		r.logf("cannot map the external IPs: %v", err)
	}
}

// natRules is an nftables script that replaces the NAT table at once with
// one that maps each external IP to its guest's address. The output hook
// is for clients in the namespace itself, prerouting for those behind its
// bridges.
func natRules(external map[netip.Addr]netip.Addr) string {
	elems := make([]string, 0, len(external))
	for nat, ip := range external {
		elems = append(elems, nat.String()+" : "+ip.String())
	}
	sort.Strings(elems)
	set := ""
	if len(elems) > 0 {
		set = "elements = { " + strings.Join(elems, ", ") + " }"
	}
	return fmt.Sprintf(`add table ip %[1]s
delete table ip %[1]s
table ip %[1]s {
	map external {
		type ipv4_addr : ipv4_addr
		%[2]s
	}
	chain prerouting {
		type nat hook prerouting priority -100
		dnat to ip daddr map @external
	}
	chain output {
		type nat hook output priority -100
		dnat to ip daddr map @external
	}
}
`, nftTable, set)
}

// close removes every guest, the NAT and the metadata server.
func (r *Runner) close() {
	r.mu.Lock()
	gs := r.guests
	r.guests = map[uint64]*guest{}
	r.mu.Unlock()
	for _, g := range gs {
		if err := r.remove(g); err != nil {
			r.logf(errFmtStop+": %v", g.name, err)
		}
	}
	_ = r.nft(fmt.Sprintf("add table ip %[1]s\ndelete table ip %[1]s\n", nftTable))
	_ = r.srv.Close()
	_ = r.inNetNS("ip", "addr", "del", MetadataAddr+"/32", "dev", r.bridge)
	_ = r.l.Disconnect()
}

func (r *Runner) nft(rules string) error {
	return r.run(strings.NewReader(rules), "nft", "-f", "-")
}

func (r *Runner) inNetNS(args ...string) error { return r.run(nil, args...) }

// run runs a command in the network namespace.
func (r *Runner) run(stdin io.Reader, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + r.cfg.NetNS}, args...)...)
	c.Stdin = stdin
	out, err := c.CombinedOutput()
	if err != nil {
		return errors.Errorf(errFmtNetNS, strings.Join(args, " "), strings.TrimSpace(string(out))+" ("+err.Error()+")")
	}
	return nil
}

func (r *Runner) logf(format string, args ...any) {
	if r.cfg.Logf != nil {
		r.cfg.Logf(format, args...)
	}
}

func metadata(inst *computepb.Instance, key string) string {
	for _, it := range inst.GetMetadata().GetItems() {
		if it.GetKey() == key {
			return it.GetValue()
		}
	}
	return ""
}

// natIP is the instance's external address: its first access config's.
func natIP(inst *computepb.Instance) string {
	for _, nic := range inst.GetNetworkInterfaces() {
		for _, ac := range nic.GetAccessConfigs() {
			if ac.GetNatIP() != "" {
				return ac.GetNatIP()
			}
		}
	}
	return ""
}

// projectZone reads them from .../projects/P/zones/Z/instances/N.
func projectZone(selfLink string) (string, string, bool) {
	_, rest, ok := strings.Cut(selfLink, "/projects/")
	f := strings.Split(rest, "/")
	if !ok || len(f) < 5 || f[1] != "zones" {
		return "", "", false
	}
	return f[0], f[2], true
}

// copyFile copies the image: nothing a VM does may change it.
func copyFile(src, dst string) error {
	in, err := os.Open(src) //nolint:gosec // The guest image.
	if err != nil {
		return errors.Wrap(err, errReadImage)
	}
	defer in.Close()           //nolint:errcheck // Read-only.
	out, err := os.Create(dst) //nolint:gosec // The runner's folder.
	if err != nil {
		return errors.Wrap(err, errCopyImage)
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return errors.Wrap(err, errCopyImage)
	}
	return errors.Wrap(out.Close(), errCopyImage)
}
