/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"

	"github.com/egressproxy/provider-egressproxy/internal/cloudinit"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

// stub writes a program into dir that logs its arguments; is-active
// answers with the exit code in dir/active.
const stubScript = `#!/bin/sh
echo "$(basename "$0") $*" >>"$STUB_LOG"
if [ "$1" = is-active ]; then exit "$(cat "$(dirname "$0")/active" 2>/dev/null || echo 3)"; fi
exit 0
`

type sandbox struct {
	dir, stubs, tools, log string
	owner                  string
}

// sandboxTools are the programs the script may use besides the stubs.
func sandboxTools() []string {
	return []string{"base64", "cmp", "install", "mktemp", "rm", "cat", "basename", "dirname", "timeout", "sh"}
}

func newSandbox(t *testing.T) *sandbox {
	t.Helper()
	testenv.LookPath(t, "bash", "Debian package bash")
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	g, err := user.LookupGroupId(u.Gid)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &sandbox{dir: dir, stubs: filepath.Join(dir, "bin"), tools: filepath.Join(dir, "tools"), log: filepath.Join(dir, "log"), owner: u.Username + ":" + g.Name}
	for _, d := range []string{s.stubs, s.tools} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Only these tools, not the host's own squid or cloud-init.
	for _, tool := range sandboxTools() {
		p := testenv.LookPath(t, tool, "Debian package coreutils or diffutils")
		if err := os.Symlink(p, filepath.Join(s.tools, tool)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"apt-get", "systemctl"} {
		s.addStub(t, p)
	}
	return s
}

func (s *sandbox) addStub(t *testing.T, name string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(s.stubs, name), []byte(stubScript), 0o755); err != nil { //nolint:gosec // An executable stub.
		t.Fatal(err)
	}
}

// runErr runs the script with only the stubs and the basic tools on PATH,
// and returns what the stubs were asked.
func (s *sandbox) runErr(t *testing.T, script string) ([]string, error) {
	t.Helper()
	_ = os.Remove(s.log)
	f := filepath.Join(s.dir, "startup-script")
	if err := os.WriteFile(f, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", f) //nolint:gosec // The test's own script.
	cmd.Env = []string{"PATH=" + s.stubs + ":" + s.tools, "STUB_LOG=" + s.log, "TMPDIR=" + s.dir}
	out, err := cmd.CombinedOutput()
	if err != nil {
		err = fmt.Errorf("startup-script: %w\n%s", err, out)
	}
	b, _ := os.ReadFile(s.log)
	return strings.Split(strings.TrimSpace(string(b)), "\n"), err
}

// reportStub stands in for the reporter: it logs its arguments and exits
// with the code in dir/serving (0, serving, when missing).
const reportStub = `#!/bin/sh
echo "report $*" >>"$STUB_LOG"
exit "$(cat "$(dirname "$0")/serving" 2>/dev/null || echo 0)"
`

func TestStartupScript(t *testing.T) {
	type boot struct {
		reason  string
		setup   func(*testing.T, *sandbox)
		conf    string
		want    []string
		wantErr bool
	}
	timer := "systemctl enable --now egressproxy-report.timer"
	// The watcher is restarted when a file changed (it may be new), else
	// started; it is never left out: it applies every later change.
	restartWatch, startWatch := "systemctl restart "+watcherUnitName, "systemctl start "+watcherUnitName
	// Boots of one VM, in order: each sees what the ones before left.
	boots := []boot{
		{
			reason: "The first boot without squid installs it, writes the files, starts squid and reports.",
			conf:   "http_port 3128\n",
			want: []string{
				"report starting",
				"apt-get update -q",
				"apt-get install -y -q --no-install-recommends squid nftables",
				"systemctl daemon-reload",
				"systemctl enable squid",
				"systemctl restart squid",
				"report ",
				timer,
				restartWatch,
			},
		},
		{
			reason: "A reboot with everything in place changes nothing, and reports.",
			setup: func(t *testing.T, s *sandbox) {
				s.addStub(t, "squid")
				s.addStub(t, "nft")
				s.write(t, "bin/active", "0")
			},
			conf: "http_port 3128\n",
			want: []string{"report starting", "systemctl enable squid", "systemctl is-active --quiet squid", "report ", timer, startWatch},
		},
		{
			reason: "With cloud-init it waits for it; a changed configuration restarts squid.",
			setup:  func(t *testing.T, s *sandbox) { s.addStub(t, "cloud-init") },
			conf:   "http_port 3129\n",
			want:   []string{"report starting", "cloud-init status --wait", "systemctl daemon-reload", "systemctl enable squid", "systemctl restart squid", "report ", timer, restartWatch},
		},
		{
			reason: "While squid does not serve, the reporter is asked again (two minutes at most), then the timer keeps reporting.",
			setup:  func(t *testing.T, s *sandbox) { s.write(t, "serving", "1") },
			conf:   "http_port 3129\n",
			want: append(append([]string{"report starting", "cloud-init status --wait", "systemctl enable squid", "systemctl is-active --quiet squid"},
				slices.Repeat([]string{"report ", "sleep 5"}, 24)...), timer, startWatch),
		},
		{
			reason: "When squid cannot be installed, the guest reports why.",
			setup: func(t *testing.T, s *sandbox) {
				_ = os.Remove(filepath.Join(s.stubs, "squid"))
				s.write(t, "bin/apt-get", "#!/bin/sh\necho \"apt-get $*\" >>\"$STUB_LOG\"\nexit 100\n")
			},
			conf: "http_port 3129\n",
			want: append(append([]string{"report starting", "cloud-init status --wait"},
				slices.Repeat([]string{"apt-get update -q", "sleep 10"}, 4)...),
				"apt-get update -q", "report failed cannot install squid and nftables with apt-get"),
			wantErr: true,
		},
	}
	s := newSandbox(t)
	s.addStub(t, "sleep")
	conf, htpasswd := filepath.Join(s.dir, "etc", "squid", "squid.conf"), filepath.Join(s.dir, "etc", "squid", "egressproxy", "htpasswd")
	report := filepath.Join(s.dir, "report")
	for i, b := range boots {
		if b.setup != nil {
			b.setup(t, s)
		}
		script := startupScript(report, []vmFile{{Path: report, Owner: s.owner, Mode: "0755", Content: []byte(reportStub)}}, []vmFile{
			{Path: conf, Owner: s.owner, Mode: "0644", Content: []byte(b.conf)},
			{Path: htpasswd, Owner: s.owner, Mode: "0640", Content: []byte("team-a:$2y$10$x'\"$(reboot)\n")},
		})
		got, err := s.runErr(t, script)
		if (err != nil) != b.wantErr {
			t.Errorf("boot %d: %s\nwant error %t, got %v", i, b.reason, b.wantErr, err)
		}
		if diff := cmp.Diff(b.want, got); diff != "" {
			t.Errorf("boot %d: %s\n-want +got:\n%s", i, b.reason, diff)
		}
		if c, _ := os.ReadFile(conf); !b.wantErr && string(c) != b.conf {
			t.Errorf("boot %d: squid.conf = %q, want %q", i, c, b.conf)
		}
	}
	if b, _ := os.ReadFile(htpasswd); string(b) != "team-a:$2y$10$x'\"$(reboot)\n" {
		t.Errorf("htpasswd = %q: content must be written verbatim, never interpreted", b)
	}
	if fi, err := os.Stat(htpasswd); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("htpasswd mode = %v, %v; want 0640", fi.Mode().Perm(), err)
	}
}

func (s *sandbox) write(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(s.dir, name), []byte(content), 0o755); err != nil { //nolint:gosec // Stubs are executables.
		t.Fatal(err)
	}
}

// TestUserDataValidSchema runs cloud-init's own schema validation over the
// user-data the backend puts in the instance metadata.
func TestUserDataValidSchema(t *testing.T) {
	bin := testenv.LookPath(t, "cloud-init", "Debian package cloud-init: hack/deps.sh cloud-init")
	pc, err := renderConfig(squid.NewVerifier(), desired(), nil)
	if err != nil {
		t.Fatal(err)
	}
	md, err := buildMetadata(pc)
	if err != nil {
		t.Fatal(err)
	}
	inst := &computepb.Instance{Metadata: md}
	f := filepath.Join(t.TempDir(), "user-data")
	if err := os.WriteFile(f, []byte(metadataValue(inst, MetadataUserData)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "schema", "--config-file", f).CombinedOutput() //nolint:gosec // The test's own file.
	if err != nil || !strings.Contains(string(out), "Valid cloud-config") {
		t.Errorf("cloud-init schema --config-file: %v\n%s", err, out)
	}
	if !strings.Contains(metadataValue(inst, MetadataStartupScript), "put "+cloudinit.DefaultHtpasswdPath+" root:proxy 0640 ") {
		t.Errorf("the startup-script must write the htpasswd file where squid reads it (%s)", squid.DefaultHtpasswdPath)
	}
}
