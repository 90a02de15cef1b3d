/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package render_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

// Bounds of everything the tests run, so a hung process fails the test
// instead of the whole test binary.
const (
	buildTimeout  = 5 * time.Minute
	cliTimeout    = 90 * time.Second
	renderTimeout = "30s"
	listenTimeout = 30 * time.Second
)

// repoPath returns a path in the checkout.
func repoPath(elem ...string) string {
	return filepath.Join(append([]string{testenv.RepoRoot()}, elem...)...)
}

// goBuild builds a package of the module into dir and returns the binary.
func goBuild(t *testing.T, pkg, dir string) string {
	t.Helper()
	gobin := testenv.LookPath(t, "go", "the Go toolchain builds the function under test")
	out := filepath.Join(dir, filepath.Base(pkg))
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, "build", "-o", out, pkg)
	cmd.Dir = testenv.RepoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// freeLoopbackAddress returns a loopback address no one listens on now.
func freeLoopbackAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("cannot find a free loopback port: %v", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// startFunction builds and starts function-egressproxy without TLS on a
// loopback port, as `crossplane render` expects a Development runtime, and
// returns its address. The process is stopped when the test ends.
func startFunction(t *testing.T) string {
	t.Helper()
	bin := goBuild(t, "./cmd/function", t.TempDir())
	addr := freeLoopbackAddress(t)
	logs := &bytes.Buffer{}
	cmd := exec.Command(bin, "--insecure", "--debug", "--address="+addr)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("cannot start the function: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("function logs:\n%s", logs)
		}
	})

	deadline := time.Now().Add(listenTimeout)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("the function exited before listening: %v\n%s", err, logs)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			return addr
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the function does not listen on %s after %s", addr, listenTimeout)
	return ""
}

// runCLI runs the Crossplane CLI and returns its stdout and stderr.
func runCLI(t *testing.T, cli string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	stdout, stderr := &bytes.Buffer{}, &bytes.Buffer{}
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.Dir = testenv.RepoRoot()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// readDocs returns the YAML documents of a file.
func readDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return splitDocs(t, string(b))
}

// splitDocs returns the YAML documents of a stream, without empty ones.
func splitDocs(t *testing.T, s string) []map[string]any {
	t.Helper()
	var docs []map[string]any
	for _, d := range strings.Split("\n"+s, "\n---") {
		o := map[string]any{}
		if err := yaml.Unmarshal([]byte(d), &o); err != nil {
			t.Fatalf("cannot parse YAML document: %v\n%s", err, d)
		}
		if len(o) > 0 {
			docs = append(docs, o)
		}
	}
	return docs
}

// writeDocs writes YAML documents to a file in dir and returns its path.
func writeDocs(t *testing.T, dir, name string, docs ...map[string]any) string {
	t.Helper()
	var parts []string
	for _, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, string(b))
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("---\n"+strings.Join(parts, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// field returns a nested field of an object, or nil.
func field(o map[string]any, path ...string) any {
	var cur any = o
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

// str returns a nested string field of an object, or "".
func str(o map[string]any, path ...string) string {
	s, _ := field(o, path...).(string)
	return s
}

// mustMap returns a nested object, creating it where missing.
func mustMap(o map[string]any, path ...string) map[string]any {
	cur := o
	for _, p := range path {
		next, ok := cur[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[p] = next
		}
		cur = next
	}
	return cur
}

func describe(o map[string]any) string {
	return fmt.Sprintf("%s %s/%s", str(o, "kind"), str(o, "metadata", "namespace"), str(o, "metadata", "name"))
}

// boundClaim returns the claim as Crossplane has it once it created the XR
// named xrName for it: its spec.resourceRef names the XR. The function asks
// for it to prove the XR's claimRef.
func boundClaim(claim map[string]any, xrName string) map[string]any {
	b := map[string]any{
		"apiVersion": str(claim, "apiVersion"),
		"kind":       str(claim, "kind"),
		"metadata":   map[string]any{"name": str(claim, "metadata", "name"), "namespace": str(claim, "metadata", "namespace")},
		"spec":       map[string]any{},
	}
	for k, v := range mustMap(claim, "spec") {
		mustMap(b, "spec")[k] = v
	}
	mustMap(b, "spec")["resourceRef"] = map[string]any{"apiVersion": str(claim, "apiVersion"), "kind": "XEgressProxy", "name": xrName}
	return b
}

// checkCondition checks an object has a condition of the type with the
// status, and a message containing msg.
func checkCondition(t *testing.T, o map[string]any, typ, status, msg string) {
	t.Helper()
	conds, _ := field(o, "status", "conditions").([]any)
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if str(m, "type") != typ {
			continue
		}
		if str(m, "status") != status || !strings.Contains(str(m, "message"), msg) {
			t.Errorf("%s condition %s: status %q message %q, want status %q and a message containing %q",
				describe(o), typ, str(m, "status"), str(m, "message"), status, msg)
		}
		return
	}
	t.Errorf("%s has no %s condition, want status %s", describe(o), typ, status)
}
