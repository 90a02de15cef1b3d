// Package testenv finds and starts the real components that integration tests
// run against: a kube-apiserver, a private libvirtd, squid, the Crossplane CLI.
//
// A test that needs a component it cannot find skips on a laptop, but fails
// when CI=true: CI installs everything, so a skip there would hide a broken
// install step behind a green run.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// InCI reports whether the tests run in CI, where no component may be missing.
func InCI() bool { return os.Getenv("CI") == "true" }

// Missing skips the test, or fails it in CI, because a component is missing.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if InCI() {
		t.Fatalf("CI=true but a required component is missing: "+format, args...)
	}
	t.Skipf("skipping: "+format+" (run hack/deps.sh or hack/tools.sh; CI=true turns this into a failure)", args...)
}

// LookPath returns the path of a program, or marks the test Missing.
func LookPath(t testing.TB, name, hint string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "%s not found in PATH (%s)", name, hint)
	}
	return p
}

// RepoRoot returns the root of the checkout, so tests can find hack/ scripts
// and generated CRDs whatever package they run in.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Tool returns the path of a program hack/tools.sh builds into its cache.
// Tests never build tools themselves (a cold build takes minutes and would
// hit test timeouts): make test runs hack/tools.sh build first.
func Tool(t testing.TB, name string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(RepoRoot(), "hack", "tools.sh"), "cached", name).Output()
	if err != nil || len(trimNL(out)) == 0 {
		Missing(t, "%s is not in the tool cache (hack/tools.sh build %s)", name, name)
	}
	return string(trimNL(out))
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
