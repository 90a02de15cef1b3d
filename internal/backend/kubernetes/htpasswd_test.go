/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

// ncsaAuth is squid's basic-auth helper, the program that checks the hash.
const ncsaAuth = "/usr/lib/squid/basic_ncsa_auth"

// TestHtpasswdCost: a generated password is hashed at bcrypt.MinCost (a
// slow hash adds nothing to a random 186-bit secret, and cost 10 was most of
// the CPU of 1000 new proxies), a person's password at the default cost;
// squid accepts both.
func TestHtpasswdCost(t *testing.T) {
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
			d := desired(func(d *backend.Desired[Params]) { d.Credentials.Generated = tc.generated })
			c := fakeCluster(t)
			if err := New(c).Create(t.Context(), d); err != nil {
				t.Fatalf("Create: %v", err)
			}
			s := &corev1.Secret{}
			if err := c.Get(t.Context(), key(), s); err != nil {
				t.Fatal(err)
			}
			file := s.Data[keyHtpasswd]
			_, hash, _ := strings.Cut(strings.TrimSpace(string(file)), ":")
			got, err := bcrypt.Cost([]byte(hash))
			if err != nil {
				t.Fatalf("not a bcrypt hash: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nbcrypt cost: -want, +got:\n%s", tc.reason, diff)
			}
			if _, err := os.Stat(ncsaAuth); err != nil {
				testenv.Missing(t, "%s (Debian package squid)", ncsaAuth)
			}
			path := filepath.Join(t.TempDir(), "htpasswd")
			if err := os.WriteFile(path, file, 0o600); err != nil {
				t.Fatal(err)
			}
			// One "user password" line per request; one OK or ERR each.
			cmd := exec.CommandContext(t.Context(), ncsaAuth, path)
			cmd.Stdin = strings.NewReader(testUser + " " + testPassword + "\n" + testUser + " wrong-" + testPassword + "\n")
			var out bytes.Buffer
			cmd.Stdout = &out
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s: %v", ncsaAuth, err)
			}
			// ERR may carry a reason ("ERR Wrong password"): the verdicts.
			var verdicts []string
			for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				verdicts = append(verdicts, strings.Fields(l)[0])
			}
			if diff := cmp.Diff([]string{"OK", "ERR"}, verdicts); diff != "" {
				t.Errorf("%s\nbasic_ncsa_auth answers (right, wrong password): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
