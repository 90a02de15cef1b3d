/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package squid

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/traffic"
)

// Addresses bound inside the rebinding test's network namespace. The public
// origin must look public to squid (see package traffic); the others are
// what a hostile name rebinds to.
const (
	rebindPublic   = traffic.AllowedOrigin // 11.11.0.1
	rebindMetadata = "169.254.169.254"
	rebindInside   = "10.20.0.1" // inside the allowed private range below
	rebindOutside  = "10.30.0.1" // private, outside it
	rebindLoopback = "127.0.0.1" // squid's own host; the DNS server listens here
	rebindAllowed  = "10.20.0.0/16"
)

// rebindExtra are test-only lines appended to the rendered config: squid
// asks the test's DNS server, and keeps an answer one second instead of a
// minute. negative_dns_ttl is also the least time squid keeps a positive
// answer (a TTL of 0 included), so this makes squid look names up again as
// often as it can: the worst case for rebinding.
var rebindExtra = []string{"dns_nameservers " + rebindLoopback, "negative_dns_ttl 1 second"}

// TestSquidRebinding shows squid never connects to a private address or a
// metadata server that an allowed name's DNS answers rebind to after an
// earlier answer was allowed, for plain HTTP and CONNECT, with the private
// check on, and off with a policy that allows one private range. The names
// resolve through a DNS server the test runs inside its own network
// namespace, which answers with TTL 0: first with an allowed address, then
// with the rebound one. An origin listens on every address of the
// namespace and counts connections per address: the rebound addresses must
// see none.
func TestSquidRebinding(t *testing.T) {
	bin := squidBinary(t)
	ns := newRebindNetNS(t)
	origin := startCountingOrigin(t, ns)
	dns := startRebindDNS(t, ns)

	type step struct {
		answers []string // the A records of this and every later lookup
		want    int      // status of the request made with them
	}
	type rebind struct {
		reason  string
		connect bool
		steps   []step
	}
	public := func(status int) step { return step{[]string{rebindPublic}, status} }
	to := func(status int, addrs ...string) step { return step{addrs, status} }
	envs := map[string]struct {
		mod     func(*Config)
		cases   map[string]rebind
		served  string   // the address allowed answers reach
		refused []string // the addresses that must see no connection
	}{
		"DenyPrivate": {
			mod: func(c *Config) { c.DenyPrivateDestinations = true },
			cases: map[string]rebind{
				"metadata":         {"A name that rebinds to the metadata server is refused.", false, []step{public(http.StatusOK), to(http.StatusForbidden, rebindMetadata)}},
				"metadata-connect": {"CONNECT to it is refused.", true, []step{public(http.StatusOK), to(http.StatusForbidden, rebindMetadata)}},
				"private":          {"A name that rebinds to a private address is refused.", false, []step{public(http.StatusOK), to(http.StatusForbidden, rebindOutside)}},
				"private-connect":  {"CONNECT to it is refused.", true, []step{public(http.StatusOK), to(http.StatusForbidden, rebindOutside)}},
				"loopback":         {"A name that rebinds to loopback (the proxy's own host) is refused.", false, []step{public(http.StatusOK), to(http.StatusForbidden, rebindLoopback)}},
				"loopback-connect": {"CONNECT to it is refused.", true, []step{public(http.StatusOK), to(http.StatusForbidden, rebindLoopback)}},
				"mixed":            {"A name whose answer holds a public and the metadata address is refused.", false, []step{public(http.StatusOK), to(http.StatusForbidden, rebindPublic, rebindMetadata)}},
			},
			served:  rebindPublic,
			refused: []string{rebindMetadata, rebindInside, rebindOutside, rebindLoopback},
		},
		"AllowedPrivate": {
			mod: func(c *Config) {
				c.DenyPrivateDestinations = false
				c.AllowedPrivateDestinations = []string{rebindAllowed}
			},
			cases: map[string]rebind{
				"outside":          {"A name that rebinds from the allowed private range to another private address is refused.", false, []step{to(http.StatusOK, rebindInside), to(http.StatusForbidden, rebindOutside)}},
				"outside-connect":  {"CONNECT to it is refused.", true, []step{to(http.StatusOK, rebindInside), to(http.StatusForbidden, rebindOutside)}},
				"metadata":         {"A name that rebinds from the allowed private range to the metadata server is refused.", false, []step{to(http.StatusOK, rebindInside), to(http.StatusForbidden, rebindMetadata)}},
				"metadata-connect": {"CONNECT to it is refused.", true, []step{to(http.StatusOK, rebindInside), to(http.StatusForbidden, rebindMetadata)}},
				"loopback":         {"A name that rebinds to loopback is refused.", false, []step{to(http.StatusOK, rebindInside), to(http.StatusForbidden, rebindLoopback)}},
				"mixed":            {"A name whose answer holds an allowed and another private address is refused: squid may connect to either.", false, []step{to(http.StatusForbidden, rebindInside, rebindOutside)}},
				"mixed-connect":    {"CONNECT to it is refused.", true, []step{to(http.StatusForbidden, rebindInside, rebindOutside)}},
			},
			served:  rebindInside,
			refused: []string{rebindMetadata, rebindOutside, rebindLoopback},
		},
	}
	port := int32(3128)
	for envName, env := range envs {
		t.Run(envName, func(t *testing.T) {
			port++
			e := startRebindSquid(t, bin, ns, port, env.mod, origin)
			origin.reset()
			names := map[string]string{}
			for name := range env.cases {
				names[name] = strings.ToLower(envName) + "-" + name + ".rebind.test"
			}
			// Every name takes its steps in lockstep, with a pause between
			// steps longer than squid keeps an answer.
			for i := 0; ; i++ {
				more := false
				for name, tc := range env.cases {
					if i >= len(tc.steps) {
						continue
					}
					more = true
					dns.set(names[name], tc.steps[i].answers)
				}
				if !more {
					break
				}
				if i > 0 {
					time.Sleep(2 * time.Second)
				}
				for name, tc := range env.cases {
					if i >= len(tc.steps) {
						continue
					}
					target := e.plainURL(names[name])
					if tc.connect {
						target = e.connectURL(names[name])
					}
					// Twice: the second request may come after squid's
					// answer expired mid-step.
					for range 2 {
						if got := e.client.get(t, target); got != tc.steps[i].want {
							t.Errorf("\n%s\nstep %d, answers %v: GET %s: status %d, want %d", tc.reason, i, tc.steps[i].answers, target, got, tc.steps[i].want)
						}
					}
				}
			}
			for name, tc := range env.cases {
				// Without a second lookup the name never rebound.
				if n := dns.lookups(names[name]); len(tc.steps) > 1 && n < len(tc.steps) {
					t.Errorf("%s: squid looked %s up %d times, want at least %d: it never saw the rebound answer", name, names[name], n, len(tc.steps))
				}
			}
			for _, a := range env.refused {
				if n := origin.conns(a); n != 0 {
					t.Errorf("the origin at %s accepted %d connections through squid, want none", a, n)
				}
			}
			if origin.conns(env.served) == 0 {
				t.Errorf("the origin at %s accepted no connection: no allowed answer was served", env.served)
			}
		})
	}
}

// newRebindNetNS returns a network namespace that lives as long as the
// test, with loopback up and the test's addresses bound.
func newRebindNetNS(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "a network namespace needs root")
	}
	for _, p := range []string{"unshare", "nsenter", "ip"} {
		testenv.LookPath(t, p, "util-linux, iproute2")
	}
	holder := exec.Command("unshare", "--net", "sleep", "infinity")
	holder.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := holder.Start(); err != nil {
		t.Fatalf("cannot start the network namespace holder: %v", err)
	}
	t.Cleanup(func() {
		_ = holder.Process.Kill()
		_ = holder.Wait()
	})
	ns := fmt.Sprintf("/proc/%d/ns/net", holder.Process.Pid)
	self, _ := os.Readlink("/proc/self/ns/net")
	for deadline := time.Now().Add(10 * time.Second); ; {
		// unshare enters the namespace before it runs sleep.
		if l, err := os.Readlink(ns); err == nil && l != self {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the holder never entered a network namespace of its own")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if out, err := exec.Command("nsenter", "--net="+ns, "ip", "link", "set", "lo", "up").CombinedOutput(); err != nil { //nolint:gosec // The test's own namespace.
		t.Fatalf("cannot bring loopback up: %v: %s", err, out)
	}
	if err := traffic.AddAddresses(ns, rebindPublic, rebindMetadata, rebindInside, rebindOutside); err != nil {
		t.Fatal(err)
	}
	return ns
}

// countingOrigin serves originBody over HTTP on port 80 and HTTPS on port
// 443 of every address of the namespace, and counts the connections each
// address accepts.
type countingOrigin struct {
	mu      sync.Mutex
	byAddr  map[string]int
	roots   *x509.CertPool // trusts the TLS origin's certificate
	plain   string
	tlsPort string
}

func startCountingOrigin(t *testing.T, ns string) *countingOrigin {
	t.Helper()
	o := &countingOrigin{byAddr: map[string]int{}}
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(originBody)) })
	for _, port := range []string{"80", "443"} {
		var l net.Listener
		if err := testenv.InNetNS(ns, func() (err error) {
			l, err = net.Listen("tcp", ":"+port)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		s := httptest.NewUnstartedServer(h)
		_ = s.Listener.Close()
		s.Listener = l
		s.Config.ConnState = func(c net.Conn, st http.ConnState) {
			if st == http.StateNew {
				a, _, _ := net.SplitHostPort(c.LocalAddr().String())
				o.mu.Lock()
				o.byAddr[netip.MustParseAddr(a).Unmap().String()]++
				o.mu.Unlock()
			}
		}
		if port == "443" {
			s.StartTLS()
			o.roots = x509.NewCertPool()
			o.roots.AddCert(s.Certificate())
		} else {
			s.Start()
		}
		t.Cleanup(s.Close)
	}
	o.plain, o.tlsPort = "80", "443"
	return o
}

func (o *countingOrigin) conns(addr string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.byAddr[addr]
}

func (o *countingOrigin) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.byAddr)
}

// rebindDNS answers A queries for the names it was given with TTL 0, and
// every other query with no record (AAAA) or NXDOMAIN (unknown names).
type rebindDNS struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	queries map[string]int
}

func startRebindDNS(t *testing.T, ns string) *rebindDNS {
	t.Helper()
	d := &rebindDNS{answers: map[string][]netip.Addr{}, queries: map[string]int{}}
	var pc net.PacketConn
	if err := testenv.InNetNS(ns, func() (err error) {
		pc, err = net.ListenPacket("udp", net.JoinHostPort(rebindLoopback, "53"))
		return err
	}); err != nil {
		t.Fatalf("cannot listen for DNS in the namespace: %v", err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if out, err := d.answer(buf[:n]); err == nil {
				_, _ = pc.WriteTo(out, from)
			}
		}
	}()
	return d
}

// set makes every later lookup of name answer addrs.
func (d *rebindDNS) set(name string, addrs []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	as := make([]netip.Addr, len(addrs))
	for i, a := range addrs {
		as[i] = netip.MustParseAddr(a)
	}
	d.answers[name] = as
}

// lookups is how many A queries for name the server answered.
func (d *rebindDNS) lookups(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.queries[name]
}

func (d *rebindDNS) answer(query []byte) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	name := strings.TrimSuffix(strings.ToLower(q.Name.String()), ".")
	d.mu.Lock()
	addrs, known := d.answers[name]
	if known && q.Type == dnsmessage.TypeA {
		d.queries[name]++
	}
	d.mu.Unlock()
	rcode := dnsmessage.RCodeSuccess
	if !known {
		rcode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RCode: rcode})
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	if q.Type == dnsmessage.TypeA {
		for _, a := range addrs {
			rh := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 0}
			if err := b.AResource(rh, dnsmessage.AResource{A: a.As4()}); err != nil {
				return nil, err
			}
		}
	}
	return b.Finish()
}

// rebindSquid is a squid inside the namespace and a client that reaches it
// from there.
type rebindSquid struct {
	client               proxyClient
	plainURL, connectURL func(host string) string
}

// startRebindSquid runs squid, rendered from a Config that allows every
// name under rebind.test and mod changed, inside the namespace on
// 127.0.0.1:port.
func startRebindSquid(t *testing.T, bin, ns string, port int32, mod func(*Config), o *countingOrigin) rebindSquid {
	t.Helper()
	dir := newSquidDir(t)
	file, err := Htpasswd(testUser, testPass)
	if err != nil {
		t.Fatal(err)
	}
	c := Config{
		ListenAddress: rebindLoopback,
		Port:          port,
		ClientCIDRs:   []string{rebindLoopback + "/32"},
		Destinations:  []string{".rebind.test"},
		ConnectPorts:  []int32{443},
		HTTPPorts:     []int32{80},
		HtpasswdPath:  dir.write(t, "htpasswd", file, 0o640),
		PIDFile:       dir.file("squid.pid"),
		CacheLog:      dir.file("cache.log"),
		AccessLog:     dir.file("access.log"),
		CoredumpDir:   dir.path,
		// No name of the host's /etc/hosts.
		HostsFile: dir.write(t, "hosts", nil, 0o644),
	}
	mod(&c)
	conf, err := Render(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range rebindExtra {
		conf = append(conf, l+"\n"...)
	}
	f := dir.write(t, "squid.conf", conf, 0o644)
	var stderr syncBuffer
	cmd := exec.Command("nsenter", "--net="+ns, bin, "-N", "-f", f) //nolint:gosec,noctx // The test's own squid; stopped by PID below.
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("cannot start squid: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		stopSquid(t, cmd.Process, exited)
		if t.Failed() {
			t.Logf("access.log:\n%s", readFile(dir.file("access.log")))
		}
	})

	addr := net.JoinHostPort(rebindLoopback, strconv.Itoa(int(port)))
	dial := func(ctx context.Context, network, a string) (net.Conn, error) {
		var conn net.Conn
		err := testenv.InNetNS(ns, func() (err error) {
			conn, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, a)
			return err
		})
		return conn, err
	}
	for deadline := time.Now().Add(squidReadyTimeout); ; {
		conn, err := dial(t.Context(), "tcp", addr)
		if err == nil {
			_ = conn.Close()
			break
		}
		select {
		case <-exited:
			t.Fatalf("squid exited before it was ready:\n%s\ncache.log:\n%s", stderr.String(), readFile(dir.file("cache.log")))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("squid not ready on %s after %s:\n%s\ncache.log:\n%s", addr, squidReadyTimeout, stderr.String(), readFile(dir.file("cache.log")))
		}
	}
	return rebindSquid{
		client:     proxyClient{proxy: addr, user: testUser, pass: testPass, roots: o.roots, dial: dial},
		plainURL:   func(host string) string { return "http://" + net.JoinHostPort(host, o.plain) + "/" },
		connectURL: func(host string) string { return "https://" + net.JoinHostPort(host, o.tlsPort) + "/" },
	}
}
