/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cloudinit

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/egressproxy/provider-egressproxy/internal/squid"
	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

func TestGuestFiles(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range GuestFiles() {
		if !cleanPath(f.Path) || seen[f.Path] {
			t.Errorf("GuestFiles(): path %q is not clean or not unique", f.Path)
		}
		seen[f.Path] = true
		if strings.Contains(f.Content, "%!") {
			t.Errorf("GuestFiles(): %s has a formatting error:\n%s", f.Path, f.Content)
		}
	}
	want := []string{ApplyScriptPath, trafficAWKPath, trafficScriptPath, trafficUnitPath, squidJournalDropIn}
	sort.Strings(want)
	if diff := cmp.Diff(want, sortedKeys(seen)); diff != "" {
		t.Errorf("GuestFiles(): -want paths, +got:\n%s", diff)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	out, err := exec.Command(bash, "-n", "-c", applyScript(guestPaths)).CombinedOutput() //nolint:gosec,noctx // The package's own script.
	if err != nil {
		t.Errorf("bash -n egressproxy-apply: %v\n%s", err, out)
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// applyEnv is a squid in a network namespace of its own (the apply program
// loads an nftables table), configured from files in dir.
type applyEnv struct {
	t      *testing.T
	ns     string
	dir    string
	script string
	cfg    squid.Config
}

const applyPort = 3128

func newApplyEnv(t *testing.T) *applyEnv {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "the apply program's test needs root (a network namespace and nftables)")
	}
	for _, p := range []string{"squid", "nft", "unshare", "nsenter", "ip", "curl", "flock"} {
		testenv.LookPath(t, p, "Debian packages squid nftables util-linux iproute2 curl")
	}
	if _, err := os.Stat(squid.DefaultAuthHelper); err != nil {
		testenv.Missing(t, "%s not found (hack/deps.sh squid)", squid.DefaultAuthHelper)
	}
	u, err := user.Lookup("proxy")
	if err != nil {
		testenv.Missing(t, "no user proxy for squid to drop to: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// squid's user must traverse and write the folder; t.TempDir's parents
	// are 0700.
	dir, err := os.MkdirTemp("", "egressproxy-apply-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { //nolint:gosec // squid's user must traverse it.
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}

	holder := exec.Command("unshare", "--net", "sleep", "600") //nolint:noctx // Killed at cleanup.
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	e := &applyEnv{t: t, ns: fmt.Sprintf("/proc/%d/ns/net", holder.Process.Pid), dir: dir}
	// unshare execs sleep once the namespace is made.
	deadline := time.Now().Add(10 * time.Second)
	for {
		self, _ := os.Readlink("/proc/self/ns/net")
		other, _ := os.Readlink(e.ns)
		if other != "" && other != self {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("unshare --net made no network namespace")
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.mustRun("ip", "link", "set", "lo", "up")

	e.cfg = squid.Config{
		Port:         applyPort,
		ClientCIDRs:  []string{"127.0.0.0/8"},
		Destinations: []string{"10.9.9.1"},
		HTTPPorts:    []int32{80},
		ConnectPorts: []int32{443},
		HtpasswdPath: filepath.Join(dir, "htpasswd"),
		PIDFile:      filepath.Join(dir, "squid.pid"),
		CacheLog:     filepath.Join(dir, "cache.log"),
		AccessLog:    filepath.Join(dir, "access.log"),
		CoredumpDir:  dir,
	}
	e.script = filepath.Join(dir, "egressproxy-apply")
	s := applyScript(applyPaths{Conf: filepath.Join(dir, "squid.conf"), Htpasswd: e.cfg.HtpasswdPath, State: filepath.Join(dir, "state"), Start: "false"})
	if err := os.WriteFile(e.script, []byte(s), 0o700); err != nil { //nolint:gosec // The program runs.
		t.Fatal(err)
	}
	return e
}

func (e *applyEnv) conf(dests ...string) []byte {
	c := e.cfg
	c.Destinations = dests
	b, err := squid.Render(c)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

func (e *applyEnv) cmd(stdin []byte, args ...string) *exec.Cmd {
	c := exec.Command("nsenter", append([]string{"--net=" + e.ns, "--"}, args...)...) //nolint:gosec,noctx // The test's own commands.
	c.Stdin = bytes.NewReader(stdin)
	return c
}

func (e *applyEnv) mustRun(args ...string) string {
	e.t.Helper()
	out, err := e.cmd(nil, args...).CombinedOutput()
	if err != nil {
		e.t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// startSquid writes conf and htpasswd as cloud-init would and runs squid
// until the test ends.
func (e *applyEnv) startSquid(conf, htpasswd []byte) {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(e.dir, "squid.conf"), conf, 0o644); err != nil { //nolint:gosec // squid.conf is public.
		e.t.Fatal(err)
	}
	if err := os.WriteFile(e.cfg.HtpasswdPath, htpasswd, 0o644); err != nil { //nolint:gosec // squid's helper reads it; a test password.
		e.t.Fatal(err)
	}
	c := e.cmd(nil, "squid", "-N", "-f", filepath.Join(e.dir, "squid.conf"))
	var stderr bytes.Buffer
	c.Stdout, c.Stderr = &stderr, &stderr
	if err := c.Start(); err != nil {
		e.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = c.Wait(); close(exited) }()
	e.t.Cleanup(func() {
		_ = c.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = c.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for e.listeners() == "" {
		select {
		case <-exited:
			e.t.Fatalf("squid exited:\n%s\n%s", stderr.String(), readFile(filepath.Join(e.dir, "cache.log")))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("squid does not listen:\n%s", readFile(filepath.Join(e.dir, "cache.log")))
		}
	}
}

func readFile(name string) string {
	b, _ := os.ReadFile(name) //nolint:gosec // The test's own files.
	return string(b)
}

// listeners are the inodes of squid's listening sockets: a reconfigure of
// squid 5 replaces them.
func (e *applyEnv) listeners() string {
	out, _ := e.cmd(nil, "bash", "-c", fmt.Sprintf(`awk -v p=%04X '$4 == "0A" { split($2, a, ":"); if (a[2] == p) print $10 }' /proc/net/tcp /proc/net/tcp6 | sort | tr '\n' ' '`, applyPort)).Output()
	return strings.TrimSpace(string(out))
}

// apply runs the program with the framed stdin.
func (e *applyEnv) apply(stdin string) (string, string, error) {
	c := e.cmd([]byte(stdin), "bash", e.script)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	return strings.TrimSpace(stdout.String()), strings.TrimSpace(stderr.String()), err
}

func frame(conf, htpasswd []byte, port int) string {
	return fmt.Sprintf("conf %s\nhtpasswd %s\nport %d\n", base64.StdEncoding.EncodeToString(conf), base64.StdEncoding.EncodeToString(htpasswd), port)
}

// status is the HTTP status squid answers for url with user:pw; 10.9.9.x
// routes nowhere in the namespace, so an allowed destination is 503.
func (e *applyEnv) status(userpw, url string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, "nsenter", "--net="+e.ns, "--", "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10", //nolint:gosec // The test's own request.
		"-x", fmt.Sprintf("http://127.0.0.1:%d", applyPort), "--proxy-user", userpw, url)
	out, _ := c.Output()
	return string(out)
}

// TestApplyScriptWithSquid runs egressproxy-apply, as GuestFiles writes it
// but with its paths in a temporary folder, against a real squid 5.
func TestApplyScriptWithSquid(t *testing.T) {
	e := newApplyEnv(t)
	ht1, err := squid.Htpasswd("team", "first-password")
	if err != nil {
		t.Fatal(err)
	}
	ht2, err := squid.Htpasswd("team", "second-password")
	if err != nil {
		t.Fatal(err)
	}
	confA, confB := e.conf("10.9.9.1"), e.conf("10.9.9.2")
	e.startSquid(confA, ht1)
	const one, two = "http://10.9.9.1/", "http://10.9.9.2/"

	type want struct {
		stdout, stderr string
		failed         bool
		reconfigured   bool
		conf           []byte
		htpasswd       []byte
		// statuses maps "user:pw url" to the HTTP status.
		statuses map[string]string
	}
	steps := []struct {
		name   string
		reason string
		stdin  string
		want   want
	}{
		{
			name:   "Unchanged",
			reason: "The files squid serves already: nothing to do, no reconfigure.",
			stdin:  frame(confA, ht1, applyPort),
			want: want{stdout: "unchanged " + squid.Checksum(confA), conf: confA, htpasswd: ht1, statuses: map[string]string{
				"team:first-password " + one: "503", "team:first-password " + two: "403",
			}},
		},
		{
			name:   "NewDestinations",
			reason: "A new squid.conf is checked, installed and served after a reconfigure.",
			stdin:  frame(confB, ht1, applyPort),
			want: want{stdout: "applied " + squid.Checksum(confB), reconfigured: true, conf: confB, htpasswd: ht1, statuses: map[string]string{
				"team:first-password " + one: "403", "team:first-password " + two: "503",
			}},
		},
		{
			name:   "BadConfig",
			reason: "A configuration squid refuses is reported and the served one stays.",
			stdin:  frame([]byte("http_port 3128\nbogus_directive 1\n"), ht1, applyPort),
			want: want{failed: true, stderr: "squid -k parse refused the configuration: squid.conf(2): unrecognized: 'bogus_directive'", conf: confB, htpasswd: ht1, statuses: map[string]string{
				"team:first-password " + two: "503",
			}},
		},
		{
			name:   "Rotation",
			reason: "A new htpasswd alone is written without a reconfigure; basic_ncsa_auth reads it.",
			stdin:  frame(confB, ht2, applyPort),
			want: want{stdout: "applied " + squid.Checksum(confB), conf: confB, htpasswd: ht2, statuses: map[string]string{
				"team:second-password " + two: "503", "team:wrong " + two: "407",
			}},
		},
		{
			name:   "NotBase64",
			reason: "A malformed frame changes nothing.",
			stdin:  "conf !!!\nhtpasswd x\nport 3128\n",
			want:   want{failed: true, stderr: "conf: not base64", conf: confB, htpasswd: ht2},
		},
		{
			name:   "BadPort",
			reason: "The port is a number.",
			stdin:  frame(confB, ht2, 0),
			want:   want{failed: true, stderr: "port: not a port number", conf: confB, htpasswd: ht2},
		},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			before := e.listeners()
			start := time.Now()
			stdout, stderr, err := e.apply(s.stdin)
			t.Logf("egressproxy-apply took %s", time.Since(start).Round(time.Millisecond))
			if (err != nil) != s.want.failed {
				t.Fatalf("\n%s\negressproxy-apply: want failed=%t, got %v\nstdout: %s\nstderr: %s\ncache.log:\n%s", s.reason, s.want.failed, err, stdout, stderr, readFile(filepath.Join(e.dir, "cache.log")))
			}
			if diff := cmp.Diff(s.want.stdout, stdout); diff != "" {
				t.Errorf("\n%s\nstdout: -want, +got:\n%s", s.reason, diff)
			}
			if diff := cmp.Diff(s.want.stderr, stderr); diff != "" {
				t.Errorf("\n%s\nstderr: -want, +got:\n%s", s.reason, diff)
			}
			if after := e.listeners(); (after != before) != s.want.reconfigured {
				t.Errorf("\n%s\nlistening sockets %q -> %q: want reconfigured=%t", s.reason, before, after, s.want.reconfigured)
			}
			if diff := cmp.Diff(string(s.want.conf), readFile(filepath.Join(e.dir, "squid.conf"))); diff != "" {
				t.Errorf("\n%s\nsquid.conf: -want, +got:\n%s", s.reason, diff)
			}
			if diff := cmp.Diff(string(s.want.htpasswd), readFile(e.cfg.HtpasswdPath)); diff != "" {
				t.Errorf("\n%s\nhtpasswd: -want, +got:\n%s", s.reason, diff)
			}
			got := map[string]string{}
			for k := range s.want.statuses {
				userpw, url, _ := strings.Cut(k, " ")
				got[k] = e.status(userpw, url)
			}
			if diff := cmp.Diff(s.want.statuses, got, cmpEmpty()); diff != "" {
				t.Errorf("\n%s\nHTTP statuses: -want, +got:\n%s", s.reason, diff)
			}
			if tables := e.mustRun("nft", "list", "tables"); strings.Contains(tables, "egressproxy_reload") {
				t.Errorf("\n%s\nthe reload guard is still loaded:\n%s", s.reason, tables)
			}
			left, _ := filepath.Glob(filepath.Join(e.dir, "*.*.??????"))
			if len(left) > 0 {
				t.Errorf("\n%s\ntemporary files left: %v", s.reason, left)
			}
		})
	}
	// Not asserted: squid's credentialsttl decides how long a password it
	// checked before the rotation still works.
	t.Logf("the old password right after the rotation: HTTP %s", e.status("team:first-password", two))
	if got := strings.TrimSpace(readFile(filepath.Join(e.dir, "state", "checksum"))); got != squid.Checksum(confB) {
		t.Errorf("state/checksum: want %s, got %s", squid.Checksum(confB), got)
	}
}

func cmpEmpty() cmp.Option {
	return cmp.FilterValues(func(a, b map[string]string) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())
}

// TestTrafficScript runs the guest's traffic counter with a journalctl that
// prints two entries: the counts and the last entry's cursor land in the
// state file together, and the next start asks journalctl for what comes
// after that cursor, so a restart counts nothing twice.
func TestTrafficScript(t *testing.T) {
	testenv.LookPath(t, "mawk", "Debian package mawk")
	dir := t.TempDir()
	state, awk, args := filepath.Join(dir, "traffic"), filepath.Join(dir, "traffic.awk"), filepath.Join(dir, "args")
	entry := func(seq int, status int) string {
		return fmt.Sprintf(`{"__CURSOR":"s=abc;i=%x;b=1;m=2;t=3;x=4","MESSAGE":"{\"time\":\"2026-12-07T10:00:0%dZ\",\"client\":\"10.0.0.1\",\"user\":\"a\",\"url\":\"http://x/\",\"status\":%d,\"bytes_sent\":1,\"bytes_received\":2,\"result\":\"TCP_MISS\",\"server\":\"-\"}"}`, seq, seq%10, status)
	}
	journal := filepath.Join(dir, "journal")
	fake := "#!/bin/sh\necho \"$*\" >>" + args + "\ncat " + journal + "\n"
	for name, content := range map[string]string{"journalctl": fake, "traffic.awk": squid.TrafficAWK} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o755); err != nil { //nolint:gosec // The test's own files.
			t.Fatal(err)
		}
	}
	run := func(entries ...string) {
		t.Helper()
		if err := os.WriteFile(journal, []byte(strings.Join(entries, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sh", "-c", trafficScript(state, awk)) //nolint:gosec,noctx // The test's own script.
		cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("traffic.sh: %v\n%s", err, out)
		}
	}
	run(entry(1, 200), entry(2, 200))
	// The second start gets the second entry again, as a journalctl that
	// seeks near a cursor might, and a new one.
	run(entry(2, 200), entry(0x13, 200))
	b, err := os.ReadFile(state) //nolint:gosec // The test's own file.
	if err != nil {
		t.Fatal(err)
	}
	got, ok := squid.ParseTraffic(string(b))
	if want := (squid.Traffic{Allowed: 3, BytesToClients: 3, BytesFromClients: 6}); !ok || got != want {
		t.Errorf("state after two starts: want %v, got %q", want, b)
	}
	if !strings.HasSuffix(strings.TrimSpace(string(b)), " cursor=s=abc;i=13;b=1;m=2;t=3;x=4") {
		t.Errorf("state after two starts: want the last entry's cursor at its end, got %q", b)
	}
	a, err := os.ReadFile(args) //nolint:gosec // The test's own file.
	if err != nil {
		t.Fatal(err)
	}
	calls := splitNonEmpty(string(a))
	if len(calls) != 2 || strings.Contains(calls[0], "--after-cursor") || !strings.HasSuffix(calls[1], " --after-cursor=s=abc;i=2;b=1;m=2;t=3;x=4") {
		t.Errorf("journalctl's arguments: want no cursor on the first start and the second entry's on the next, got %q", calls)
	}
}

func splitNonEmpty(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}
