/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/bcrypt"
	"sigs.k8s.io/yaml"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

func TestSeedISO(t *testing.T) {
	d := desired()
	b := testBackend(newFake(), nil)
	sd, err := b.buildSeed(context.Background(), d, MACAddress(testUID))
	if err != nil {
		t.Fatal(err)
	}
	iso, err := sd.iso()
	if err != nil {
		t.Fatal(err)
	}
	files := readISO(t, iso)
	for _, f := range []string{fileUserData, fileMetaData, fileNetworkConfig} {
		if len(files[f]) == 0 {
			t.Errorf("the seed lacks %s; it holds %v", f, keys(files))
		}
	}
	var meta map[string]string
	if err := yaml.Unmarshal(files[fileMetaData], &meta); err != nil || meta["instance-id"] != d.Name {
		t.Errorf("meta-data: %v, %v", meta, err)
	}
	if !strings.Contains(string(files[fileNetworkConfig]), MACAddress(testUID)) {
		t.Errorf("network-config does not match the NIC's MAC:\n%s", files[fileNetworkConfig])
	}
	if !squid.HtpasswdMatches([]byte(sd.Htpasswd), d.Credentials.Username, d.Credentials.Password) {
		t.Error("the htpasswd recorded for the metadata does not accept the credentials")
	}
	sum, err := b.configChecksum(context.Background(), d)
	if err != nil || sum != sd.ConfigChecksum {
		t.Errorf("configChecksum %q differs from the seed's %q (%v)", sum, sd.ConfigChecksum, err)
	}
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestSeedUserDataSchema runs cloud-init's own validation over the
// user-data read back from the seed ISO.
func TestSeedUserDataSchema(t *testing.T) {
	bin := testenv.LookPath(t, "cloud-init", "Debian package cloud-init: hack/deps.sh cloud-init")
	sd, err := testBackend(newFake(), nil).buildSeed(context.Background(), desired(), MACAddress(testUID))
	if err != nil {
		t.Fatal(err)
	}
	iso, err := sd.iso()
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), fileUserData)
	if err := os.WriteFile(f, readISO(t, iso)[fileUserData], 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "schema", "--config-file", f).CombinedOutput() //nolint:gosec // The test's own file.
	if err != nil || !strings.Contains(string(out), "Valid cloud-config") {
		t.Errorf("cloud-init schema: %v\n%s", err, out)
	}
}

func TestSeedUserDataSecret(t *testing.T) {
	ref := &commonv1alpha1.LocalSecretKeySelector{Name: "ud", Key: "user-data"}
	d := desired(func(d *Desired) { d.Params.UserDataSecretRef = ref })
	own := []byte("#cloud-config\npackages: [squid]\n")
	var gotNS string
	src := func(_ context.Context, ns string, r commonv1alpha1.LocalSecretKeySelector) ([]byte, error) {
		gotNS = ns
		if r != *ref {
			return nil, errors.New("wrong ref")
		}
		return own, nil
	}
	b := testBackend(newFake(), nil, WithUserDataSource(src))
	sd, err := b.buildSeed(context.Background(), d, MACAddress(testUID))
	if err != nil {
		t.Fatal(err)
	}
	if string(sd.UserData) != string(own) || sd.ConfigChecksum != squid.Checksum(own) || sd.Htpasswd != "" || gotNS != testNamespace {
		t.Errorf("seed from the user's user-data: %+v (namespace %q)", sd, gotNS)
	}
	failing := testBackend(newFake(), nil, WithUserDataSource(func(context.Context, string, commonv1alpha1.LocalSecretKeySelector) ([]byte, error) {
		return nil, backend.Permanent(errors.New("no such Secret"))
	}))
	if _, err := failing.configChecksum(context.Background(), d); backend.ClassOf(err) != backend.ClassPermanent {
		t.Errorf("a Secret that cannot be read: want Permanent, got %v", err)
	}
}

// TestSeedHtpasswdCost: a generated password is hashed at bcrypt.MinCost, as
// backend.HtpasswdCost says (at the default cost it was most of the
// provider's CPU while new KVM proxies converged), a person's password at
// the default cost.
func TestSeedHtpasswdCost(t *testing.T) {
	cases := map[string]struct {
		reason    string
		generated bool
		want      int
	}{
		"Generated": {reason: "A generated password gets the lowest cost.", generated: true, want: bcrypt.MinCost},
		"Given":     {reason: "A password a person chose keeps the default cost.", want: bcrypt.DefaultCost},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := desired()
			d.Credentials.Generated = tc.generated
			sd, err := testBackend(newFake(), nil).buildSeed(context.Background(), d, MACAddress(testUID))
			if err != nil {
				t.Fatal(err)
			}
			_, hash, _ := strings.Cut(strings.TrimSpace(sd.Htpasswd), ":")
			got, err := bcrypt.Cost([]byte(hash))
			if err != nil {
				t.Fatalf("not a bcrypt hash: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nbcrypt cost: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestSeedWritesOnlyUnderTempDir checks the seed ISO is staged under
// TMPDIR and nowhere else, and leaves nothing there: the provider runs with
// a read-only root file system and a memory emptyDir at /tmp
// (examples/runtime/provider-egressproxy.yaml).
func TestSeedWritesOnlyUnderTempDir(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Setenv("HOME", filepath.Join(t.TempDir(), "absent"))
	b := testBackend(newFake(), nil)
	sd, err := b.buildSeed(context.Background(), desired(), MACAddress(testUID))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sd.iso(); err != nil {
		t.Fatalf("iso with a writable TMPDIR: %v", err)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("iso left %d entries in TMPDIR: %v", len(left), left)
	}
	// With TMPDIR absent the build fails: it uses TMPDIR, not another
	// writable place such as /tmp or HOME.
	t.Setenv("TMPDIR", filepath.Join(tmp, "absent"))
	if _, err := sd.iso(); err == nil {
		t.Error("iso succeeded with TMPDIR absent: it writes somewhere else")
	}
}
