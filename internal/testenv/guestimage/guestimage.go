// Package guestimage finds the KVM guest image hack/guest-image.sh builds: a
// Debian bookworm qcow2 with cloud-init, squid and the QEMU guest agent, that
// boots with BIOS and reads a NoCloud seed from a virtio disk.
package guestimage

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

const (
	errRunScript = "cannot run hack/guest-image.sh path"
	errStat      = "cannot find the image hack/guest-image.sh named"
)

// Guest memory the image needs: it does not boot with 128 MiB and uses about
// 220 MiB once squid serves.
const (
	MinMemoryMiB         = 256
	RecommendedMemoryMiB = 512
)

// Path returns the cached image, or marks the test Missing. Tests never
// build it (about a minute with downloads, and root): make test and make
// dev run hack/guest-image.sh first.
func Path(t testing.TB) string {
	t.Helper()
	p, err := Find()
	if err != nil {
		t.Fatalf("cannot find the KVM guest image: %v", err)
	}
	if p == "" {
		testenv.Missing(t, "the KVM guest image is not built (run hack/guest-image.sh; make test builds it)")
	}
	return p
}

// Find returns the cached image's path, or "" when it is not built.
func Find() (string, error) {
	out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "guest-image.sh"), "path").Output() //nolint:gosec // Our own script.
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return "", nil // "path" exits 1 when the image is not built
	}
	if err != nil {
		return "", errors.Wrap(err, errRunScript)
	}
	p := strings.TrimSpace(string(out))
	_, err = os.Stat(p)
	return p, errors.Wrap(err, errStat)
}
