/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"golang.org/x/sys/unix"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/traffic"
)

// The proxy overhead bench (docs/bench.md, "Proxy overhead"): per backend,
// real squid with the configuration the backend renders and its access log
// path, in a network namespace of the bench's own with the origin and the
// client, against the same origin without the proxy.

const (
	overheadPort = 3128
	overheadUser = "bench"
	// overheadPass stands for a generated password, hashed as the
	// provider hashes those (backend.HtpasswdCost).
	overheadPass = "bench-overhead-password-0123456789"
	// overheadClient is the address the client reaches the proxy at, and
	// so sends from: the only client CIDR the proxy allows.
	overheadClient = "127.0.0.1"

	squidReadyTimeout = 30 * time.Second
	squidStopTimeout  = 15 * time.Second
	requestTimeout    = 20 * time.Second

	// goalRatio is issue 40's goal for every backend, printed next to the
	// figures, never asserted.
	goalRatio = 0.5
)

// accessLogPath is how squid's access log leaves the proxy of a backend,
// the one part of the data path its squid.conf does not say.
type accessLogPath int

const (
	// accessLogFIFO: the access log file is a FIFO that squid.TrafficAWK
	// reads, copying every line to its stdout, the container's log (a file
	// here).
	accessLogFIFO accessLogPath = iota
	// accessLogFile: the access log is a plain file, and, when the
	// configuration says AccessLogSyslog, syslog, whose messages
	// squid.TrafficAWK counts (on a VM: journald, read by journalctl).
	accessLogFile
)

// A dataPlane is what a backend's bench registers for the overhead bench:
// the squid configuration its proxies run and how their access log leaves
// squid.
type dataPlane struct {
	// config is the backend's squid configuration for p (its
	// DataPlaneConfig); the bench replaces only the host paths.
	config    func(p commonv1alpha1.ProxyParameters) squid.Config
	accessLog accessLogPath
	// args are squid's flags before -f, as the backend starts it.
	args []string
	// goalAddedP99 is the backend's goal for the p99 latency the proxy
	// adds, printed, never asserted; zero for none.
	goalAddedP99 time.Duration
}

// A mode is one way a client uses the proxy.
type mode struct {
	name      string
	connect   bool // CONNECT to the origin's HTTPS port, TLS through it
	keepAlive bool // reuse connections (and tunnels)
}

func overheadModes() []mode {
	return []mode{
		{name: "HTTP keep-alive", keepAlive: true},
		{name: "HTTP new connection"},
		{name: "CONNECT keep-alive", connect: true, keepAlive: true},
		{name: "CONNECT new connection", connect: true},
	}
}

// A cell is what one load run measured.
type cell struct {
	// samples are the latencies of the requests answered 200 with the
	// origin's body.
	samples []time.Duration
	// errors counts the others: transport errors and other answers.
	errors int
	// dials counts the connections opened.
	dials   int
	elapsed time.Duration
}

// figures are a cell's figures.
type figures struct {
	OK       int
	Errors   int
	RPS      float64
	P50, P99 time.Duration
}

// summarize returns the figures of c: requests per second over its
// elapsed time, and the nearest-rank percentiles of its samples.
func summarize(c cell) figures {
	f := figures{OK: len(c.samples), Errors: c.errors}
	if c.elapsed > 0 {
		f.RPS = float64(len(c.samples)) / c.elapsed.Seconds()
	}
	s := append([]time.Duration(nil), c.samples...)
	slices.Sort(s)
	f.P50 = percentile(s, 50)
	f.P99 = percentile(s, 99)
	return f
}

// percentile returns the nearest-rank p-th percentile of sorted: the
// smallest sample that at least p % of the samples do not exceed. Zero for
// no samples.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	// ceil(p/100 * n), 1-based.
	rank := (p*len(sorted) + 99) / 100
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}

// An overheadRow is one mode's figures, direct and through the proxy.
type overheadRow struct {
	mode          string
	direct, proxy figures
}

// An overheadResult is one backend's table.
type overheadResult struct {
	backend     string
	concurrency int
	per         time.Duration
	loadBefore  string
	loadAfter   string
	logPath     string
	args        string
	// extra are the lines of -overhead-squid.
	extra string
	// goalAddedP99: see dataPlane.
	goalAddedP99 time.Duration
	// sameAs names an earlier backend whose squid.conf and log path were
	// the same.
	sameAs string
	rows   []overheadRow
	// counted is what squid.TrafficAWK counted from the access log,
	// logged the lines squid should have written for the load (every cell
	// and warm-up).
	counted, logged uint64
	countedOK       bool
}

// overheadBench runs every backend's overhead bench in one network
// namespace and origin, one squid at a time.
type overheadBench struct {
	o      options
	dir    string
	netns  string
	holder *exec.Cmd
	origin *traffic.Origin
	squid  string
	awk    string
	// confs are the rendered configurations measured so far, by backend,
	// with their log paths.
	confs []renderedDataPlane
}

type renderedDataPlane struct {
	backend string
	sum     string
	log     accessLogPath
	args    []string
}

// newOverheadBench checks the components and starts the namespace and the
// origin. It fails with errMissing when the machine lacks a component.
func newOverheadBench(ctx context.Context, o options) (*overheadBench, error) {
	if o.concurrency < 1 || o.overheadFor <= 0 {
		return nil, errors.New("-overhead-concurrency and -overhead-for must be positive")
	}
	if os.Geteuid() != 0 {
		return nil, errors.Wrap(errMissing, "the proxy overhead bench needs root (network and mount namespaces)")
	}
	b := &overheadBench{o: o}
	var err error
	for _, p := range []struct {
		name string
		to   *string
	}{{"squid", &b.squid}, {"mawk", &b.awk}, {"unshare", nil}, {"nsenter", nil}, {"ip", nil}, {"mount", nil}} {
		path, err := exec.LookPath(p.name)
		if err != nil {
			return nil, errors.Wrapf(errMissing, "%s not found (hack/deps.sh squid; util-linux, iproute2, mawk)", p.name)
		}
		if p.to != nil {
			*p.to = path
		}
	}
	if _, err := os.Stat(squid.DefaultAuthHelper); err != nil {
		return nil, errors.Wrapf(errMissing, "%s not found (hack/deps.sh squid)", squid.DefaultAuthHelper)
	}
	// Not in the state folder: squid's user must traverse every parent.
	if b.dir, err = os.MkdirTemp("", "egressproxy-overhead-"); err != nil {
		return nil, errors.Wrap(err, "cannot create the overhead folder")
	}
	if err := os.Chmod(b.dir, 0o755); err != nil { //nolint:gosec // squid's user must traverse it.
		b.stop()
		return nil, errors.Wrap(err, "cannot create the overhead folder")
	}
	if o.keep {
		logf("overhead state and logs: %s", b.dir)
	}
	if b.holder, b.netns, err = startNetNS(ctx); err != nil {
		b.stop()
		return nil, errors.Wrap(err, "cannot create the overhead bench's network namespace")
	}
	if err := traffic.AddAddresses(b.netns, traffic.AllowedOrigin); err != nil {
		b.stop()
		return nil, err
	}
	// New connections at thousands a second from a handful of addresses
	// would run out of ports in TIME_WAIT within a cell: let connects
	// reuse them, in this namespace only.
	for k, v := range map[string]string{"net.ipv4.tcp_tw_reuse": "1", "net.ipv4.ip_local_port_range": "1024 65535"} {
		if out, err := exec.CommandContext(ctx, "nsenter", "--net="+b.netns, "--", "sysctl", "-qw", k+"="+v).CombinedOutput(); err != nil { //nolint:gosec // Our own namespace.
			b.stop()
			return nil, errors.Wrapf(err, "cannot set %s in the namespace: %s", k, out)
		}
	}
	if b.origin, err = traffic.StartOrigin(b.netns, traffic.AllowedOrigin); err != nil {
		b.stop()
		return nil, err
	}
	return b, nil
}

func (b *overheadBench) stop() {
	if b.dir != "" && !b.o.keep {
		defer os.RemoveAll(b.dir) //nolint:errcheck // Best effort.
	}
	if b.origin != nil {
		b.origin.Close()
	}
	if b.holder != nil {
		_ = b.holder.Process.Kill()
		_ = b.holder.Wait()
	}
}

// proxyParameters is the proxy measured: the origin allowed, the client's
// address, the API's default ports.
func proxyParameters() commonv1alpha1.ProxyParameters {
	return commonv1alpha1.ProxyParameters{
		Port:                overheadPort,
		AllowedClientCIDRs:  []string{overheadClient + "/32"},
		AllowedDestinations: []string{traffic.AllowedOrigin},
		AllowedConnectPorts: []int32{backend.DefaultConnectPort},
		AllowedHTTPPorts:    backend.DefaultHTTPPorts(),
	}
}

// run measures one backend's data plane.
func (b *overheadBench) run(ctx context.Context, name string, dp dataPlane) (*overheadResult, error) {
	if len(b.o.squidArgs) > 0 {
		dp.args = b.o.squidArgs
	}
	res := &overheadResult{backend: name, concurrency: b.o.concurrency, per: b.o.overheadFor, loadBefore: loadAvg()}
	s, err := b.startSquid(ctx, name, dp)
	if err != nil {
		return nil, err
	}
	defer s.stop()
	res.logPath = s.describe
	res.args = strings.Join(dp.args, " ")
	res.extra = b.o.squidExtra
	res.goalAddedP99 = dp.goalAddedP99
	// The configuration as the backend renders it, with its own paths.
	own, err := squid.Render(dp.config(proxyParameters()))
	if err != nil {
		return nil, errors.Wrap(err, "cannot render the backend's squid configuration")
	}
	sum := squid.Checksum(own)
	for _, c := range b.confs {
		if c.sum == sum && c.log == dp.accessLog && slices.Equal(c.args, dp.args) {
			res.sameAs = c.backend
			break
		}
	}
	b.confs = append(b.confs, renderedDataPlane{backend: name, sum: sum, log: dp.accessLog, args: dp.args})

	proxy := &url.URL{Scheme: "http", User: url.UserPassword(overheadUser, overheadPass), Host: net.JoinHostPort(overheadClient, strconv.Itoa(overheadPort))}
	warm := min(b.o.overheadFor/5, 2*time.Second)
	for _, m := range overheadModes() {
		target := "http://" + traffic.AllowedOrigin + "/"
		if m.connect {
			target = "https://" + net.JoinHostPort(traffic.AllowedOrigin, strconv.Itoa(backend.DefaultConnectPort)) + "/"
		}
		row := overheadRow{mode: m.name}
		for _, via := range []*url.URL{nil, proxy} {
			l := newLoad(b.netns, target, via, m.keepAlive, b.o.concurrency, b.origin.Roots)
			// A warm-up, not counted: the first connections, squid's
			// first authentication.
			w := l.run(ctx, warm)
			c := l.run(ctx, b.o.overheadFor)
			l.close()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if via == nil {
				row.direct = summarize(c)
			} else {
				row.proxy = summarize(c)
				res.logged += logLines(m, w) + logLines(m, c)
			}
		}
		logf("%s: overhead: %s: direct %.0f/s, proxy %.0f/s", name, m.name, row.direct.RPS, row.proxy.RPS)
		res.rows = append(res.rows, row)
	}
	// squid writes its last log lines as it stops; the counter's last
	// write follows.
	s.stop()
	if t, ok := squid.ParseTraffic(readFile(s.trafficFile)); ok {
		res.counted, res.countedOK = t.Allowed+t.DeniedAuth+t.DeniedClient+t.DeniedDestination, true
	}
	res.loadAfter = loadAvg()
	return res, nil
}

// logLines is how many access log lines squid writes for c: one per HTTP
// request, one per CONNECT tunnel (a connection, here).
func logLines(m mode, c cell) uint64 {
	if m.connect {
		return uint64(c.dials) //nolint:gosec // A count.
	}
	return uint64(len(c.samples) + c.errors) //nolint:gosec // A count.
}

func readFile(name string) string {
	b, _ := os.ReadFile(name) //nolint:gosec // The bench's own file.
	return string(b)
}

// runningSquid is one backend's squid and its access log reader.
type runningSquid struct {
	conf        []byte
	describe    string
	trafficFile string
	cmd         *exec.Cmd
	exited      chan struct{}
	// awk and its stdin (nil for the FIFO, which squid closes).
	awk      *exec.Cmd
	awkIn    io.WriteCloser
	syslog   *net.UnixConn
	stopOnce sync.Once
}

// startSquid writes the backend's configuration with the bench's paths and
// starts squid in the namespace with its access log path.
func (b *overheadBench) startSquid(ctx context.Context, name string, dp dataPlane) (*runningSquid, error) {
	dir := filepath.Join(b.dir, name)
	uid, gid, err := proxyUser()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // squid's user must traverse it.
		return nil, errors.Wrap(err, "cannot create the squid folder")
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, errors.Wrap(err, "cannot hand the squid folder to user proxy")
	}
	file := func(n string) string { return filepath.Join(dir, n) }
	htpasswd, err := squid.NewVerifier().HtpasswdCost(overheadUser, overheadPass, backend.HtpasswdCost(backend.Credentials{Generated: true}))
	if err != nil {
		return nil, errors.Wrap(err, "cannot hash the password")
	}
	if err := writeOwned(file("htpasswd"), htpasswd, 0o640, -1, gid); err != nil {
		return nil, err
	}
	c := dp.config(proxyParameters())
	c.HtpasswdPath = file("htpasswd")
	c.PIDFile = file("squid.pid")
	c.CacheLog = file("cache.log")
	c.AccessLog = file("access.log")
	c.CoredumpDir = dir
	c.AuthHelper = ""
	conf, err := squid.Render(c)
	if err != nil {
		return nil, errors.Wrap(err, "cannot render the backend's squid configuration")
	}
	if b.o.squidExtra != "" {
		conf = append(conf, "\n# -overhead-squid\n"+strings.ReplaceAll(b.o.squidExtra, ";", "\n")+"\n"...)
	}
	if err := writeOwned(file("squid.conf"), conf, 0o644, -1, -1); err != nil {
		return nil, err
	}
	s := &runningSquid{conf: conf, trafficFile: file("traffic"), exited: make(chan struct{})}
	squidArgs := append(append([]string{}, dp.args...), "-f", file("squid.conf"))
	args := append([]string{"--net=" + b.netns, "--", b.squid}, squidArgs...)
	var env []string
	switch {
	case dp.accessLog == accessLogFIFO:
		// squid writes to a FIFO that awk reads and copies to the
		// container's log.
		if err := unix.Mkfifo(c.AccessLog, 0o600); err != nil {
			return nil, errors.Wrap(err, "cannot make the access log FIFO")
		}
		if err := os.Chown(c.AccessLog, uid, gid); err != nil {
			return nil, errors.Wrap(err, "cannot hand the access log FIFO to user proxy")
		}
		s.awk = exec.Command("sh", "-c", `exec "$0" -v out="$1" "$2" <"$3" >"$4"`, b.awk, s.trafficFile, squid.TrafficAWK, c.AccessLog, file("container.log")) //nolint:gosec,noctx // Our own awk; ends with squid.
		s.describe = "a FIFO read by squid.TrafficAWK (mawk), which copies it to a file (the container's log)"
	case c.AccessLogSyslog != "":
		// The file, and syslog, which a reader of the bench's own hands
		// to awk as journalctl would.
		dev := file("dev")
		if err := os.MkdirAll(dev, 0o755); err != nil { //nolint:gosec // squid's user looks up /dev/log in it.
			return nil, errors.Wrap(err, "cannot create the /dev folder")
		}
		sock := filepath.Join(dev, "log")
		_ = os.Remove(sock)
		if s.syslog, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"}); err != nil {
			return nil, errors.Wrap(err, "cannot listen on the syslog socket")
		}
		if err := os.Chmod(sock, 0o666); err != nil { //nolint:gosec // squid writes to it as user proxy.
			return nil, errors.Wrap(err, "cannot open the syslog socket to squid")
		}
		wrapper := file("squid-devlog")
		if err := os.WriteFile(wrapper, []byte(testenv.DevLogWrapper), 0o700); err != nil { //nolint:gosec // A script the bench runs.
			return nil, errors.Wrap(err, "cannot write the /dev/log wrapper")
		}
		args = append([]string{"--net=" + b.netns, "--", wrapper}, squidArgs...)
		env = []string{"EGRESSPROXY_TEST_DEV=" + dev, "EGRESSPROXY_TEST_SQUID=" + b.squid}
		s.awk = exec.Command(b.awk, "-v", "out="+s.trafficFile, squid.TrafficAWK) //nolint:gosec,noctx // Our own awk.
		if s.awkIn, err = s.awk.StdinPipe(); err != nil {
			return nil, errors.Wrap(err, "cannot pipe to awk")
		}
		s.describe = "a file, and syslog (" + c.AccessLogSyslog + ") to a socket the bench reads and pipes to squid.TrafficAWK (mawk), in place of journald and journalctl, which this host does not run"
	default:
		s.describe = "a file"
	}
	if s.awk != nil {
		s.awk.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := s.awk.Start(); err != nil {
			return nil, errors.Wrap(err, "cannot start awk")
		}
	}
	if s.syslog != nil {
		go s.readSyslog()
	}
	var stderr strings.Builder
	var mu sync.Mutex
	s.cmd = exec.Command("nsenter", args...) //nolint:gosec,noctx // Our own squid; stopped below.
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.Stdout = &lockedWriter{mu: &mu, w: &stderr}
	s.cmd.Stderr = s.cmd.Stdout
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		s.stopReaders()
		return nil, errors.Wrap(err, "cannot start squid")
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	addr := net.JoinHostPort(overheadClient, strconv.Itoa(overheadPort))
	deadline := time.Now().Add(squidReadyTimeout)
	for {
		var conn net.Conn
		err := testenv.InNetNS(b.netns, func() (err error) {
			conn, err = net.DialTimeout("tcp", addr, time.Second)
			return err
		})
		if err == nil {
			_ = conn.Close()
			return s, nil
		}
		fail := ""
		select {
		case <-s.exited:
			fail = "squid exited before it was ready"
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
			if time.Now().After(deadline) {
				fail = "squid not ready after " + squidReadyTimeout.String()
			}
		}
		if fail != "" {
			s.stop()
			mu.Lock()
			defer mu.Unlock()
			return nil, errors.Errorf("%s: %s\ncache.log:\n%s", fail, stderr.String(), readFile(c.CacheLog))
		}
	}
}

// readSyslog hands every message to awk, one line each, as
// journalctl --output=cat would.
func (s *runningSquid) readSyslog() {
	buf := make([]byte, 64<<10)
	for {
		n, err := s.syslog.Read(buf)
		if err != nil {
			return
		}
		m := strings.TrimSuffix(string(buf[:n]), "\n") + "\n"
		if _, err := io.WriteString(s.awkIn, m); err != nil {
			return
		}
	}
}

// stop interrupts squid (SIGINT: without waiting for shutdown_lifetime),
// kills it if it does not exit in time, and waits for awk to write its
// last counts.
func (s *runningSquid) stop() {
	s.stopOnce.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.exited:
		case <-time.After(squidStopTimeout):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
		s.stopReaders()
	})
}

func (s *runningSquid) stopReaders() {
	if s.syslog != nil {
		// Let the last messages in the socket reach awk.
		_ = s.syslog.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		time.Sleep(600 * time.Millisecond)
		_ = s.syslog.Close()
	}
	if s.awkIn != nil {
		_ = s.awkIn.Close()
	}
	if s.awk != nil && s.awk.Process != nil {
		done := make(chan struct{})
		go func() { _ = s.awk.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(squidStopTimeout):
			_ = s.awk.Process.Kill()
			<-done
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// proxyUser returns the IDs of user proxy, which squid drops to as root.
func proxyUser() (int, int, error) {
	u, err := user.Lookup("proxy")
	if err != nil {
		return 0, 0, errors.Wrap(errMissing, "there is no user proxy for squid to drop to")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return uid, gid, nil
}

// writeOwned writes a file squid (or its helper) reads, the way a Secret or
// cloud-init would.
func writeOwned(name string, data []byte, mode os.FileMode, uid, gid int) error {
	if err := os.WriteFile(name, data, mode); err != nil {
		return errors.Wrap(err, "cannot write "+filepath.Base(name))
	}
	if err := os.Chmod(name, mode); err != nil {
		return errors.Wrap(err, "cannot write "+filepath.Base(name))
	}
	return errors.Wrap(os.Chown(name, uid, gid), "cannot write "+filepath.Base(name))
}

// A load sends GET target from concurrency workers, each one request at a
// time, from inside a network namespace, directly or through a proxy. Its
// connections live from one run to the next, so a warm-up's stay open for
// the cell after it.
type load struct {
	target      string
	concurrency int
	client      *http.Client
	transport   *http.Transport
	dials       atomic.Int64
}

func newLoad(netns, target string, proxy *url.URL, keepAlive bool, concurrency int, roots *x509.CertPool) *load {
	l := &load{target: target, concurrency: concurrency}
	dialer := &net.Dialer{Timeout: requestTimeout}
	l.transport = &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			l.dials.Add(1)
			var c net.Conn
			err := testenv.InNetNS(netns, func() (err error) {
				c, err = dialer.DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
		DisableKeepAlives:   !keepAlive,
		MaxIdleConnsPerHost: concurrency,
		TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
	}
	if proxy != nil {
		l.transport.Proxy = http.ProxyURL(proxy)
	}
	l.client = &http.Client{Transport: l.transport, Timeout: requestTimeout}
	return l
}

// close closes the load's idle connections.
func (l *load) close() { l.transport.CloseIdleConnections() }

// run sends requests for d and returns what they measured.
func (l *load) run(ctx context.Context, d time.Duration) cell {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		mu  sync.Mutex
		out cell
		wg  sync.WaitGroup
	)
	l.dials.Store(0)
	start := time.Now()
	for range l.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var samples []time.Duration
			errs := 0
			for ctx.Err() == nil {
				t0 := time.Now()
				ok := get(ctx, l.client, l.target)
				took := time.Since(t0)
				if ctx.Err() != nil {
					// Cut off by the end of the cell.
					break
				}
				if ok {
					samples = append(samples, took)
				} else {
					errs++
				}
			}
			mu.Lock()
			out.samples = append(out.samples, samples...)
			out.errors += errs
			mu.Unlock()
		}()
	}
	wg.Wait()
	out.elapsed = time.Since(start)
	out.dials = int(l.dials.Load())
	return out
}

// get is true when target answered 200 with the origin's body.
func get(ctx context.Context, c *http.Client, target string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return false
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close() //nolint:errcheck // Read to the end.
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return err == nil && resp.StatusCode == http.StatusOK && string(body) == traffic.Body
}

// print writes the backend's table.
func (r *overheadResult) print(w io.Writer) {
	fmt.Fprintf(w, "\n## proxy overhead: %s\n\n", r.backend)
	fmt.Fprintf(w, "squid %s (%s) with the backend's rendered squid.conf; access log: %s. ", r.args, squidVersion(), r.logPath)
	if r.extra != "" {
		fmt.Fprintf(w, "Added by -overhead-squid: %q. ", r.extra)
	}
	if r.sameAs != "" {
		fmt.Fprintf(w, "Its squid.conf, flags and access log path are the same as %s's. ", r.sameAs)
	}
	fmt.Fprintf(w, "Client, origin and squid in one network namespace of the bench's own; concurrency %d, %s per cell after a warm-up; load average %s before, %s after.\n\n",
		r.concurrency, r.per, r.loadBefore, r.loadAfter)
	fmt.Fprintln(w, "| mode | direct req/s | proxy req/s | proxy/direct | direct p50 / p99 | proxy p50 / p99 | added p99 | errors direct / proxy |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, row := range r.rows {
		ratio := 0.0
		if row.direct.RPS > 0 {
			ratio = row.proxy.RPS / row.direct.RPS
		}
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %.2f | %s / %s | %s / %s | %s | %d / %d |\n", row.mode,
			row.direct.RPS, row.proxy.RPS, ratio, durMS(row.direct.P50), durMS(row.direct.P99), durMS(row.proxy.P50), durMS(row.proxy.P99),
			durMS(row.proxy.P99-row.direct.P99), row.direct.Errors, row.proxy.Errors)
	}
	fmt.Fprintf(w, "\nGoal (issue 40, not asserted): proxy/direct >= %.2f", goalRatio)
	if r.goalAddedP99 > 0 {
		fmt.Fprintf(w, ", added p99 <= %s", durMS(r.goalAddedP99))
	}
	fmt.Fprintln(w, ".")
	if r.countedOK {
		fmt.Fprintf(w, "The access log counter (squid.TrafficAWK) counted %d requests; the load completed %d (a CONNECT tunnel is one; the requests a cell's end cut off are logged, not counted here).\n", r.counted, r.logged)
	} else {
		fmt.Fprintf(w, "The access log counter (squid.TrafficAWK) wrote no counts; the load completed %d requests (a CONNECT tunnel is one).\n", r.logged)
	}
}

// durMS formats d in milliseconds, two decimals.
func durMS(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + " ms"
}

var squidVersionOnce = sync.OnceValue(func() string {
	out, err := exec.Command("squid", "-v").Output() //nolint:noctx // A version string.
	if err != nil {
		return "unknown version"
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(strings.TrimPrefix(first, "Squid Cache: "))
})

func squidVersion() string { return squidVersionOnce() }
