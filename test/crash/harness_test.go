/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package crash

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

const (
	// providerInstance is explicit so the suite does not depend on how the
	// provider derives its default.
	providerInstance = "crash-test"
	// gcInterval is short and the minimum age zero: garbage collection runs
	// between and right after the kills, when a provider that has just
	// started knows least, and must still delete nothing live.
	gcInterval = 2 * time.Second
	// configName is the ClusterProviderConfig of every backend.
	configName = "crash"
	// secretNamespace holds the backends' credentials Secrets.
	secretNamespace = "crash-system"

	// envProvider names a provider binary to run instead of one built
	// from this checkout, such as a release build.
	envProvider = "CRASH_PROVIDER_BINARY"

	// fastPoll makes the resources converge quickly; slowPoll leaves the
	// backends to the garbage collector, whose passes would otherwise wait
	// behind every resource's Observe calls on libvirt's test driver.
	fastPoll = time.Second
	slowPoll = time.Minute

	readyTimeout = 3 * time.Minute
	heldTimeout  = 45 * time.Second
)

// env is the control plane and the provider process the suite kills.
type env struct {
	c    *cluster.Cluster
	bin  string
	proc *cluster.Process
	// kills counts the SIGKILLs.
	kills int
}

// startEnv brings up a kube-apiserver with the provider's CRDs,
// kube-controller-manager, kwok and kube-scheduler (so the kubernetes
// backend's Deployments become available), and builds the provider.
func startEnv(t *testing.T) *env {
	t.Helper()
	if kube.BinDir() == "" {
		testenv.Missing(t, "the envtest binaries are not built (hack/tools.sh build etcd kube-apiserver kubectl)")
	}
	for _, tool := range []string{"kube-controller-manager", "kube-scheduler", "kwok"} {
		testenv.Tool(t, tool)
	}
	ctx := t.Context()
	built := make(chan error, 1)
	bin := filepath.Join(t.TempDir(), "provider")
	go func() {
		if p := os.Getenv(envProvider); p != "" {
			bin = p
			built <- nil
			return
		}
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/provider")
		cmd.Dir = testenv.RepoRoot()
		out, err := cmd.CombinedOutput()
		if err != nil {
			err = fmt.Errorf("go build ./cmd/provider: %w\n%s", err, out)
		}
		built <- err
	}()
	c, err := cluster.StartBare(ctx, cluster.Options{Logf: t.Logf})
	if err != nil {
		t.Fatalf("cannot start the control plane: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.Keep()
			t.Logf("logs of the control plane and the provider: %s", c.LogDir)
		}
		c.Stop()
	})
	if err := <-built; err != nil {
		t.Fatal(err)
	}
	e := &env{c: c, bin: bin}
	// The provider dies before the control plane stops.
	t.Cleanup(e.kill)
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secretNamespace}}); err != nil {
		t.Fatal(err)
	}
	return e
}

// start runs the provider and waits until it serves its ready probe. It
// polls every managed resource every poll, and collects garbage every
// gcInterval when gc is true.
func (e *env) start(t *testing.T, gc bool, poll time.Duration) {
	t.Helper()
	port := freePort(t)
	args := []string{
		"--debug",
		"--poll=" + poll.String(),
		// Long enough that a create held while the other backends' are
		// caught is still in flight when the provider is killed.
		"--timeout=2m",
		"--max-reconcile-rate=20",
		"--provider-instance=" + providerInstance,
		// The key of generated passwords lives with the backends' Secrets.
		"--namespace=" + secretNamespace,
		"--health-interval=0",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(port),
		"--gc-min-age=0s",
		"--gc-interval=0",
	}
	if gc {
		args[len(args)-1] = "--gc-interval=" + gcInterval.String()
	}
	args = append(args, targetFlags()...)
	p, err := e.c.StartProcess("provider", e.bin, args, []string{"KUBECONFIG=" + e.c.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	e.proc = p
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.Exited():
			return false, fmt.Errorf("the provider exited: %v (log: %s)", p.Err(), p.Log)
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		rsp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		_ = rsp.Body.Close()
		return rsp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("the provider did not become ready: %v", err)
	}
}

// kill kills the provider with SIGKILL, if it runs.
func (e *env) kill() {
	if e.proc == nil {
		return
	}
	select {
	case <-e.proc.Exited():
	default:
		e.proc.Kill()
		e.kills++
	}
	e.proc = nil
}

// restart kills the provider and starts it again.
func (e *env) restart(t *testing.T, gc bool, poll time.Duration) {
	t.Helper()
	e.kill()
	e.start(t, gc, poll)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close() //nolint:errcheck // Only its port was needed.
	return l.Addr().(*net.TCPAddr).Port
}

// gcDeleted sums what the provider's garbage collector says it deleted,
// over every run of the provider so far.
func (e *env) gcDeleted(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.c.LogDir, "provider.log"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, "Garbage collected orphan instances") {
			continue
		}
		if m := reDeleted.FindStringSubmatch(l); m != nil {
			d, _ := strconv.Atoi(m[1])
			n += d
		}
	}
	return n
}

var reDeleted = regexp.MustCompile(`"deleted":\s*(\d+)`)

// mrList returns the managed resources of a target.
func (e *env) mrList(ctx context.Context, tg *target) ([]unstructured.Unstructured, error) {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion(tg.apiVersion)
	l.SetKind(tg.kind + "List")
	if err := e.c.Client.List(ctx, l, client.InNamespace(tg.namespace)); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// ready counts the target's managed resources that are Ready.
func (e *env) ready(ctx context.Context, tg *target) (int, error) {
	mrs, err := e.mrList(ctx, tg)
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range mrs {
		if cluster.HasCondition(&mrs[i], "Ready", "True") {
			n++
		}
	}
	return n, nil
}

// inWindow reports whether the managed resource whose instance is name
// was killed between its backend call and the write of its creation
// result: the pending annotation is there, and no result newer than it.
func (e *env) inWindow(ctx context.Context, tg *target, name string) (bool, string) {
	mrs, err := e.mrList(ctx, tg)
	if err != nil {
		return false, err.Error()
	}
	for i := range mrs {
		mr := &mrs[i]
		if meta.GetExternalName(mr) != name {
			continue
		}
		a := mr.GetAnnotations()
		pending, ok := parseTime(a[meta.AnnotationKeyExternalCreatePending])
		if !ok {
			return false, "no " + meta.AnnotationKeyExternalCreatePending + " annotation"
		}
		for _, k := range []string{meta.AnnotationKeyExternalCreateSucceeded, meta.AnnotationKeyExternalCreateFailed} {
			if done, ok := parseTime(a[k]); ok && !done.Before(pending) {
				return false, k + " is " + a[k] + ", not before the pending " + a[meta.AnnotationKeyExternalCreatePending]
			}
		}
		return true, ""
	}
	return false, "no managed resource has external name " + name
}

func parseTime(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339, s)
	return t, err == nil
}
