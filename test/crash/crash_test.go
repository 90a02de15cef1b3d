/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package crash is the kill -9 suite: it runs the real provider binary
// against a real kube-apiserver and the backends' test doubles (the
// kubernetes backend on the same apiserver with kube-controller-manager and
// kwok, gcp on the GCE fake, kvm on libvirt's test driver in a private
// libvirtd), creates managed resources, and SIGKILLs the provider while they
// converge, some of the kills exactly between a backend's create call and
// the write of the creation result. Then every resource must be Ready with
// exactly one instance at the backend, garbage collection with a minimum
// age of zero must have deleted nothing live, and deleting the resources
// must leave nothing behind.
package crash

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// mrsPerBackend managed resources are created per backend, in batches.
	mrsPerBackend = 30
	batches       = 3
	// envSeed makes a run's random kill moments reproducible.
	envSeed = "CRASH_SEED"
	// gcTimeout bounds the wait for whole garbage collection passes.
	gcTimeout = time.Minute
)

// result is what the suite found for one backend.
type result struct {
	ready, duplicates, gcDeletedLive, leaks int
	// replaced counts the instances deleted at the backend, and made
	// again, while the resources converged: not a failure, but a cost of
	// the kills worth seeing.
	replaced int
	// halfMadeLeaks counts what is left of an instance whose Create was
	// killed half way and whose resource was then deleted.
	halfMadeLeaks int
}

// knownHalfMadeLeaks are the backends known to leave parts of an instance
// whose Create was killed half way and whose resource was then deleted, and
// why: Observe says NotFound, so the reconciler removes its finalizer
// without calling Delete, and List (the garbage collector's) does not see
// those parts either. Listed, a leak is logged; a listed backend that no
// longer leaks fails the test, so that its entry goes once it is fixed.
var knownHalfMadeLeaks = map[string]string{}

// halfMade kills the provider between two steps of Create (the trap holds
// the step before the backend sees it), deletes the resource while the
// provider is down, starts it again and counts what is left at the backend.
func halfMade(t *testing.T, e *env, targets []*target, results map[string]*result) {
	t.Helper()
	ctx := t.Context()
	const i = mrsPerBackend // a resource of its own
	for _, tg := range targets {
		if tg.hold == nil {
			continue
		}
		tg.hold.armEarly()
		if err := e.c.Client.Create(ctx, tg.mr(i)); err != nil {
			t.Fatal(err)
		}
	}
	caught := map[*target]bool{}
	for _, tg := range targets {
		if tg.hold == nil {
			continue
		}
		select {
		case <-tg.hold.held:
			caught[tg] = true
		case <-time.After(heldTimeout):
			tg.hold.disarm()
			t.Errorf("%s: Create did not reach its later step within %s", tg.name, heldTimeout)
		}
	}
	e.kill()
	for tg := range caught {
		if err := e.c.Client.Delete(ctx, tg.mr(i)); err != nil {
			t.Fatal(err)
		}
	}
	e.start(t, false, fastPoll)
	for tg := range caught {
		r := results[tg.name]
		err := wait.PollUntilContextTimeout(ctx, time.Second, readyTimeout, true, func(ctx context.Context) (bool, error) {
			mrs, err := e.mrList(ctx, tg)
			return len(mrs) == 0, err
		})
		if err != nil {
			t.Errorf("%s: the half made resource was not deleted: %v", tg.name, err)
		}
		left, err := tg.leftovers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r.halfMadeLeaks = len(left) - r.leaks
		why, known := knownHalfMadeLeaks[tg.name]
		switch {
		case r.halfMadeLeaks > 0 && known:
			t.Logf("%s: KNOWN BUG, left at the backend after a half made resource was deleted: %s (%s)", tg.name, short(left), why)
		case r.halfMadeLeaks > 0:
			t.Errorf("%s: left at the backend after a half made resource was deleted: %s", tg.name, short(left))
		case known:
			t.Errorf("%s: no longer leaks a half made instance: remove it from knownHalfMadeLeaks", tg.name)
		}
	}
}

func TestKill9(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv(envSeed), 10, 64); err == nil {
		seed = s
	}
	t.Logf("random kill moments from seed %d (%s=%d repeats them)", seed, envSeed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	pause := func(lo, hi time.Duration) { time.Sleep(lo + time.Duration(rng.Int64N(int64(hi-lo)))) }

	begin := time.Now()
	phase := func(name string) { t.Logf("%-44s at %s", name, time.Since(begin).Round(time.Second)) }
	e := startEnv(t)
	ctx := t.Context()
	targets := startTargets(t, e)
	// Kill the provider before the test servers in front of the backends
	// close, which wait for the requests they hold.
	t.Cleanup(e.kill)
	for _, tg := range targets {
		if err := e.c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tg.namespace}}); err != nil {
			t.Fatal(err)
		}
	}
	results := map[string]*result{}
	for _, tg := range targets {
		results[tg.name] = &result{}
	}

	phase("control plane and backends up")
	e.start(t, true, fastPoll)
	per := mrsPerBackend / batches
	for b := range batches {
		// A kill in the window: hold the response to a create the
		// backend has done, and kill the provider while it waits.
		for _, tg := range targets {
			if tg.hold != nil {
				tg.hold.arm()
			}
		}
		for _, tg := range targets {
			for i := b * per; i < (b+1)*per; i++ {
				if err := e.c.Client.Create(ctx, tg.mr(i)); err != nil {
					t.Fatal(err)
				}
			}
		}
		held := map[*target]string{}
		for _, tg := range targets {
			if tg.hold == nil {
				continue
			}
			select {
			case name := <-tg.hold.held:
				held[tg] = name
			case <-time.After(heldTimeout):
				tg.hold.disarm()
				t.Errorf("%s: batch %d: no create reached the backend within %s", tg.name, b+1, heldTimeout)
			}
		}
		e.kill()
		for tg, name := range held {
			if ok, why := e.inWindow(ctx, tg, name); ok {
				tg.windowKills++
			} else {
				t.Errorf("%s: batch %d: the kill with the create of %s held was not in the window: %s", tg.name, b+1, name, why)
			}
		}
		e.start(t, true, fastPoll)
		// A kill at a random moment while the batch converges.
		pause(200*time.Millisecond, 2*time.Second)
		e.restart(t, true, fastPoll)
	}
	pause(500*time.Millisecond, 3*time.Second)
	e.restart(t, true, fastPoll)
	convergeKills := e.kills
	phase(fmt.Sprintf("%d kills, %d with a create held", convergeKills, batches))

	// Every resource Ready, with exactly one instance.
	before := map[string]map[string]string{}
	for _, tg := range targets {
		r := results[tg.name]
		err := wait.PollUntilContextTimeout(ctx, time.Second, readyTimeout, true, func(ctx context.Context) (bool, error) {
			n, err := e.ready(ctx, tg)
			r.ready = n
			return n == mrsPerBackend, err
		})
		if err != nil {
			t.Errorf("%s: %d of %d managed resources Ready: %v", tg.name, r.ready, mrsPerBackend, err)
		}
		tl := tallyOf(t, e, tg)
		r.duplicates = len(tl.duplicates)
		if len(tl.missing) > 0 || len(tl.duplicates) > 0 {
			t.Errorf("%s: want exactly one instance per managed resource; without one: %s; duplicates: %s", tg.name, short(tl.missing), short(tl.duplicates))
		}
		before[tg.name] = tl.versions
	}

	// Deletes so far replaced instances the kills left half made. From
	// now on garbage collection at a minimum age of zero, which has run
	// every gcInterval since the first start, must delete nothing.
	phase("every resource Ready and counted")
	lists := map[string]int64{}
	for _, tg := range targets {
		if tg.hold != nil {
			results[tg.name].replaced = int(tg.hold.deleted.Swap(0))
			lists[tg.name] = tg.hold.lists.Load()
		}
	}
	// A provider that has just started knows least: collect with one.
	e.restart(t, true, slowPoll)
	// Two List calls mean that at least one whole pass ran: the second
	// starts when the first has finished.
	_ = wait.PollUntilContextTimeout(ctx, gcInterval, gcTimeout, true, func(context.Context) (bool, error) {
		for _, tg := range targets {
			if tg.hold != nil && tg.hold.lists.Load()-lists[tg.name] < 2 {
				return false, nil
			}
		}
		return true, nil
	})
	for _, tg := range targets {
		r := results[tg.name]
		gone := changed(before[tg.name], tallyOf(t, e, tg).versions)
		r.gcDeletedLive = len(gone)
		if tg.hold != nil {
			r.gcDeletedLive = max(r.gcDeletedLive, int(tg.hold.deleted.Load()))
			if n := tg.hold.lists.Load() - lists[tg.name]; n < 2 {
				t.Errorf("%s: the garbage collector listed the backend %d times in %s, want at least 2", tg.name, n, gcTimeout)
			}
		}
		if r.gcDeletedLive > 0 {
			t.Errorf("%s: %d instances deleted at the backend while every managed resource was Ready (%s)", tg.name, r.gcDeletedLive, short(gone))
		}
	}
	if n := e.gcDeleted(t); n > 0 {
		t.Errorf("the garbage collector says it deleted %d instances while every managed resource lived", n)
	}

	phase("garbage collection checked")
	// Delete everything, with garbage collection off so that it cannot
	// hide what Delete leaves behind, and one more kill.
	e.restart(t, false, fastPoll)
	for _, tg := range targets {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(tg.apiVersion)
		u.SetKind(tg.kind)
		if err := e.c.Client.DeleteAllOf(ctx, u, client.InNamespace(tg.namespace)); err != nil {
			t.Fatal(err)
		}
	}
	pause(200*time.Millisecond, 2*time.Second)
	e.restart(t, false, fastPoll)
	for _, tg := range targets {
		r := results[tg.name]
		err := wait.PollUntilContextTimeout(ctx, time.Second, readyTimeout, true, func(ctx context.Context) (bool, error) {
			mrs, err := e.mrList(ctx, tg)
			return len(mrs) == 0, err
		})
		if err != nil {
			t.Errorf("%s: the managed resources were not deleted: %v", tg.name, err)
		}
		left, err := tg.leftovers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r.leaks = len(left)
		if len(left) > 0 {
			t.Errorf("%s: left at the backend after every managed resource was deleted: %s", tg.name, short(left))
		}
	}

	phase("every resource deleted, leftovers counted")

	halfMade(t, e, targets, results)
	phase("half made, then deleted")
	for _, tg := range targets {
		r := results[tg.name]
		line := fmt.Sprintf("crash: backend=%s creates=%d kills=%d window_kills=%d ready=%d duplicates=%d gc_deleted_live=%d leaks=%d replaced=%d half_made_leaks=%d",
			tg.name, mrsPerBackend, convergeKills, tg.windowKills, r.ready, r.duplicates, r.gcDeletedLive, r.leaks, r.replaced, r.halfMadeLeaks)
		t.Log(line)
		fmt.Println(line)
	}
}

// tallyOf counts the instances of a target's managed resources.
func tallyOf(t *testing.T, e *env, tg *target) tally {
	t.Helper()
	ctx := t.Context()
	mrs, err := e.mrList(ctx, tg)
	if err != nil {
		t.Fatal(err)
	}
	ins, err := tg.instances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return count(mrs, ins)
}
