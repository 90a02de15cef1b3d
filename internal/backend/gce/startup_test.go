/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gce

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
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

// run runs the script with only the stubs and the basic tools on PATH, and
// returns what the stubs were asked.
func (s *sandbox) run(t *testing.T, script string) []string {
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
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("startup-script: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(s.log)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func TestStartupScript(t *testing.T) {
	s := newSandbox(t)
	conf, htpasswd := filepath.Join(s.dir, "etc", "squid", "squid.conf"), filepath.Join(s.dir, "etc", "squid", "egressproxy", "htpasswd")
	script := func(c string) string {
		return startupScript([]vmFile{
			{Path: conf, Owner: s.owner, Mode: "0644", Content: []byte(c)},
			{Path: htpasswd, Owner: s.owner, Mode: "0640", Content: []byte("team-a:$2y$10$x'\"$(reboot)\n")},
		})
	}

	got := s.run(t, script("http_port 3128\n"))
	want := []string{
		"apt-get update -q",
		"apt-get install -y -q --no-install-recommends squid nftables",
		"systemctl daemon-reload",
		"systemctl enable squid",
		"systemctl restart squid",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("first boot without squid: -want +got:\n%s", diff)
	}
	if b, _ := os.ReadFile(htpasswd); string(b) != "team-a:$2y$10$x'\"$(reboot)\n" {
		t.Errorf("htpasswd = %q: content must be written verbatim, never interpreted", b)
	}
	if fi, err := os.Stat(htpasswd); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("htpasswd mode = %v, %v; want 0640", fi.Mode().Perm(), err)
	}

	s.addStub(t, "squid")
	s.addStub(t, "nft")
	if err := os.WriteFile(filepath.Join(s.stubs, "active"), []byte("0"), 0o600); err != nil {
		t.Fatal(err)
	}
	got = s.run(t, script("http_port 3128\n"))
	if diff := cmp.Diff([]string{"systemctl enable squid", "systemctl is-active --quiet squid"}, got); diff != "" {
		t.Errorf("a reboot with everything in place must change nothing: -want +got:\n%s", diff)
	}

	s.addStub(t, "cloud-init")
	got = s.run(t, script("http_port 3129\n"))
	if diff := cmp.Diff([]string{"cloud-init status --wait", "systemctl daemon-reload", "systemctl enable squid", "systemctl restart squid"}, got); diff != "" {
		t.Errorf("with cloud-init, and a changed configuration: -want +got:\n%s", diff)
	}
	if b, _ := os.ReadFile(conf); string(b) != "http_port 3129\n" {
		t.Errorf("squid.conf = %q, want the new configuration", b)
	}
}

// TestUserDataValidSchema runs cloud-init's own schema validation over the
// user-data the backend puts in the instance metadata.
func TestUserDataValidSchema(t *testing.T) {
	bin := testenv.LookPath(t, "cloud-init", "Debian package cloud-init: hack/deps.sh cloud-init")
	pc, err := renderConfig(desired(), nil)
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
