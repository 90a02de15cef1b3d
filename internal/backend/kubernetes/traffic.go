/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"context"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/ptr"

	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// The proxy's traffic figures come from its pods: the traffic container
// prints the counts squid.TrafficAWK keeps (buildTrafficContainer), and
// Observe reads the last line of its log, at most every defaultTrafficTTL per pod.
// One small GET per pod and TTL, and no exec or follow: a log line costs
// the kubelet next to nothing, and nothing runs that the pod did not.
const (
	// defaultTrafficTTL is how long a pod's figure is used before it is
	// read again; a read that failed is tried again after it too.
	defaultTrafficTTL = 30 * time.Second
	// trafficTimeout bounds one read: Observe must not wait on a slow
	// kubelet for a figure it can do without.
	trafficTimeout = 2 * time.Second
)

// podLogs reads the last line a container of a pod logged.
type podLogs interface {
	lastLine(ctx context.Context, ns, pod, container string) (string, error)
}

// clientLogs reads pod logs through the API server (pods/log get).
type clientLogs struct{ pods corev1client.PodsGetter }

func (c clientLogs) lastLine(ctx context.Context, ns, pod, container string) (string, error) {
	b, err := c.pods.Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, TailLines: ptr.To[int64](1)}).DoRaw(ctx)
	return string(b), err
}

// podTraffic is what was last read of one pod.
type podTraffic struct {
	t     squid.Traffic
	ok    bool
	at    time.Time // when t was read
	tried time.Time // when a read was last tried
}

// instanceTraffic is what the backend knows of one instance's pods.
type instanceTraffic struct {
	pods map[types.UID]*podTraffic
	// retired sums the last figures of the pods that are gone, so the
	// instance's figures do not fall when a rollout replaces its pods.
	retired squid.Traffic
}

// trafficCounts keeps the figures of every instance of a backend.
type trafficCounts struct {
	mu sync.Mutex
	// instances by namespace/name; Delete forgets one.
	instances map[string]*instanceTraffic
}

// traffic returns the summed figures of the instance ns/name, whose pods
// are pods, and when the oldest of them was read; nil when a ready pod's
// figure cannot be had (never an error: the figures are a bonus of
// Observe, not a condition of it).
func (b *Backend) traffic(ctx context.Context, ns, name string, pods []*corev1.Pod, now time.Time) (*squid.Traffic, time.Time) {
	if b.logs == nil {
		return nil, time.Time{}
	}
	tc := &b.counts
	tc.mu.Lock()
	if tc.instances == nil {
		tc.instances = map[string]*instanceTraffic{}
	}
	key := ns + "/" + name
	it := tc.instances[key]
	if it == nil {
		it = &instanceTraffic{pods: map[types.UID]*podTraffic{}}
		tc.instances[key] = it
	}
	// Pods no longer ready retire with their last figure; a pod that
	// stops serving for a moment counts on from there, as awk does.
	ready := map[types.UID]*corev1.Pod{}
	for _, p := range pods {
		if podReady(p) {
			ready[p.UID] = p
		}
	}
	for uid, pt := range it.pods {
		if _, ok := ready[uid]; !ok {
			if pt.ok {
				add(&it.retired, pt.t)
			}
			delete(it.pods, uid)
		}
	}
	var stale []*corev1.Pod
	for uid, p := range ready {
		pt := it.pods[uid]
		if pt == nil {
			pt = &podTraffic{}
			it.pods[uid] = pt
		}
		if now.Sub(pt.tried) >= b.trafficTTL {
			pt.tried = now
			stale = append(stale, p)
		}
	}
	tc.mu.Unlock()

	// Read without the lock: other instances' Observes go on meanwhile.
	type read struct {
		uid types.UID
		t   squid.Traffic
		ok  bool
	}
	reads := make([]read, 0, len(stale))
	for _, p := range stale {
		rctx, cancel := context.WithTimeout(ctx, trafficTimeout)
		line, err := b.logs.lastLine(rctx, p.Namespace, p.Name, trafficName)
		cancel()
		if err != nil {
			continue
		}
		t, ok := parseTrafficLine(line)
		reads = append(reads, read{uid: p.UID, t: t, ok: ok})
	}

	tc.mu.Lock()
	defer tc.mu.Unlock()
	for _, r := range reads {
		if pt := it.pods[r.uid]; pt != nil && r.ok {
			pt.t, pt.ok, pt.at = r.t, true, now
		}
	}
	sum, oldest := it.retired, now
	for uid := range ready {
		pt := it.pods[uid]
		if pt == nil || !pt.ok {
			return nil, time.Time{}
		}
		add(&sum, pt.t)
		if pt.at.Before(oldest) {
			oldest = pt.at
		}
	}
	if len(ready) == 0 {
		return nil, time.Time{}
	}
	return &sum, oldest
}

// forgetTraffic drops what the backend knows of the instance ns/name.
func (b *Backend) forgetTraffic(ns, name string) {
	b.counts.mu.Lock()
	defer b.counts.mu.Unlock()
	delete(b.counts.instances, ns+"/"+name)
}

// parseTrafficLine reads the traffic container's line: an empty one is a
// pod that has not counted a request yet.
func parseTrafficLine(line string) (squid.Traffic, bool) {
	line = strings.TrimSpace(line)
	if line == "" {
		return squid.Traffic{}, true
	}
	return squid.ParseTraffic(line)
}

func add(sum *squid.Traffic, t squid.Traffic) {
	sum.Allowed += t.Allowed
	sum.DeniedDestination += t.DeniedDestination
	sum.DeniedClient += t.DeniedClient
	sum.DeniedAuth += t.DeniedAuth
	sum.BytesToClients += t.BytesToClients
	sum.BytesFromClients += t.BytesFromClients
}
