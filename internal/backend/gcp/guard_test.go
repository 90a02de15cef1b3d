/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"

	"github.com/egressproxy/provider-egressproxy/internal/squid"
	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

// scriptFiles returns the files a startup-script puts, by path.
func scriptFiles(t *testing.T, script string) map[string]vmFile {
	t.Helper()
	out := map[string]vmFile{}
	for _, m := range regexp.MustCompile(`(?m)^put (\S+) (\S+) (\S+) '([A-Za-z0-9+/=]*)'$`).FindAllStringSubmatch(script, -1) {
		b, err := base64.StdEncoding.DecodeString(m[4])
		if err != nil {
			t.Fatalf("put %s: %v", m[1], err)
		}
		out[m[1]] = vmFile{Path: m[1], Owner: m[2], Mode: m[3], Content: b}
	}
	return out
}

// TestMetadataGuardRendered checks that every VM gets the guard that keeps
// squid's user from the metadata server, loaded before squid starts.
func TestMetadataGuardRendered(t *testing.T) {
	pc, err := renderConfig(squid.NewVerifier(), desired(), nil)
	if err != nil {
		t.Fatal(err)
	}
	md, err := buildMetadata(pc)
	if err != nil {
		t.Fatal(err)
	}
	inst := &computepb.Instance{Metadata: md}
	files := scriptFiles(t, metadataValue(inst, MetadataStartupScript))
	want := map[string]vmFile{
		metadataGuardPath:   {Path: metadataGuardPath, Owner: "root:root", Mode: "0644", Content: []byte(metadataGuard)},
		metadataGuardDropIn: {Path: metadataGuardDropIn, Owner: "root:root", Mode: "0644", Content: []byte(metadataGuardUnit)},
	}
	for p, w := range want {
		if diff := cmp.Diff(w, files[p]); diff != "" {
			t.Errorf("startup-script file %s: -want +got:\n%s", p, diff)
		}
	}
	if !strings.Contains(metadataGuard, `meta skuid "proxy" ip daddr 169.254.169.254 counter reject`) {
		t.Errorf("the guard must reject squid's user going to 169.254.169.254:\n%s", metadataGuard)
	}
	if !strings.Contains(metadataGuardUnit, "\nExecStartPre=/usr/sbin/nft -f "+metadataGuardPath+"\n") {
		t.Errorf("squid's unit must load the guard before it starts:\n%s", metadataGuardUnit)
	}
	if got := metadataValue(inst, MetadataGuestVersion); got != guestVersion {
		t.Errorf("metadata %s = %q, want %q", MetadataGuestVersion, got, guestVersion)
	}
}

// TestMetadataGuardEnforced loads the guard with the real nft in a network
// namespace of the test's own, where 169.254.169.254 is a loopback
// address, and counts what it rejects: squid's user going to the metadata
// port, but not its DNS, and not root. hack/deps.sh installs nftables; a
// namespace needs root.
func TestMetadataGuardEnforced(t *testing.T) {
	nft, err := exec.LookPath("nft")
	if err != nil {
		testenv.Missing(t, "nft is not installed (Debian package nftables, hack/deps.sh nftables)")
	}
	for _, tool := range []string{"unshare", "ip", "setpriv", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, "%s is not installed", tool)
		}
	}
	if os.Geteuid() != 0 {
		testenv.Missing(t, "a network namespace needs root")
	}
	if _, err := user.Lookup("proxy"); err != nil {
		testenv.Missing(t, "there is no user proxy (Debian's squid package creates it)")
	}
	dir := t.TempDir()
	ruleset := filepath.Join(dir, "guard.nft")
	if err := os.WriteFile(ruleset, []byte(metadataGuard), 0o644); err != nil { //nolint:gosec // Read by nft.
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "unshare", "-n", nft, "-c", "-f", ruleset).CombinedOutput(); err != nil { //nolint:gosec // The test's own file.
		t.Fatalf("nft -c -f: %v\n%s", err, out)
	}

	// Every connection is refused (nothing listens): the counter of the
	// reject rule tells which ones the guard refused.
	const probe = `set -eu
ip link set lo up
ip addr add 169.254.169.254/32 dev lo
nft -f "$1"
proxy() { setpriv --reuid=proxy --regid=proxy --clear-groups bash -c "echo >/dev/tcp/169.254.169.254/$1" 2>/dev/null || true; }
root() { bash -c "echo >/dev/tcp/169.254.169.254/$1" 2>/dev/null || true; }
count() { nft list table inet egressproxy_metadata_guard | sed -n 's/.*ip daddr 169.254.169.254 counter packets \([0-9]*\).*/\1/p'; }
proxy 53; root 80
echo "allowed $(count)"
proxy 80
echo "refused $(count)"
`
	out, err := exec.CommandContext(ctx, "unshare", "-n", "bash", "-c", probe, "probe", ruleset).CombinedOutput() //nolint:gosec // The test's own script.
	if err != nil {
		t.Fatalf("probe in a network namespace: %v\n%s", err, out)
	}
	var allowed, refused int
	if _, err := fmt.Sscanf(string(out), "allowed %d\nrefused %d\n", &allowed, &refused); err != nil {
		t.Fatalf("probe output %q: %v", out, err)
	}
	if allowed != 0 || refused == 0 {
		t.Errorf("the guard rejected %d packets of DNS and of root, want 0; then %d of squid's user to port 80, want some", allowed, refused-allowed)
	}
}
