/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// fakeLogs answers lastLine from lines by pod name, and counts the reads.
type fakeLogs struct {
	lines map[string]string
	errs  map[string]error
	reads int
}

func (f *fakeLogs) lastLine(_ context.Context, _, pod, container string) (string, error) {
	f.reads++
	if container != trafficName {
		return "", errors.New("wrong container " + container)
	}
	if err := f.errs[pod]; err != nil {
		return "", err
	}
	return f.lines[pod], nil
}

func trafficPod(name string, ready bool) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: types.UID("uid-" + name)},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
}

func line(allowed, deniedDest uint64) string {
	return squid.Traffic{Allowed: allowed, DeniedDestination: deniedDest, BytesToClients: 10 * allowed}.String() + "\n"
}

func TestTraffic(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 13, 0, 0, 0, time.UTC)
	type poll struct {
		at    time.Duration
		pods  []*corev1.Pod
		lines map[string]string
		errs  map[string]error
	}
	type result struct {
		Traffic *squid.Traffic
		At      time.Duration
		Reads   int
	}
	cases := map[string]struct {
		reason string
		polls  []poll
		want   []result
	}{
		"Summed": {
			reason: "The figures of the ready pods add up; a pod not ready is not read.",
			polls: []poll{{pods: []*corev1.Pod{trafficPod("a", true), trafficPod("b", true), trafficPod("c", false)},
				lines: map[string]string{"a": line(3, 1), "b": line(4, 0)}}},
			want: []result{{Traffic: &squid.Traffic{Allowed: 7, DeniedDestination: 1, BytesToClients: 70}, Reads: 2}},
		},
		"NothingYet": {
			reason: "A pod that has counted nothing prints an empty line: zero, not unknown.",
			polls:  []poll{{pods: []*corev1.Pod{trafficPod("a", true)}, lines: map[string]string{"a": "\n"}}},
			want:   []result{{Traffic: &squid.Traffic{}, Reads: 1}},
		},
		"Cached": {
			reason: "A figure is read again only after defaultTrafficTTL: a poll in between costs no call.",
			polls: []poll{
				{pods: []*corev1.Pod{trafficPod("a", true)}, lines: map[string]string{"a": line(1, 0)}},
				{at: 10 * time.Second, pods: []*corev1.Pod{trafficPod("a", true)}, lines: map[string]string{"a": line(5, 0)}},
				{at: defaultTrafficTTL, pods: []*corev1.Pod{trafficPod("a", true)}, lines: map[string]string{"a": line(5, 0)}},
			},
			want: []result{
				{Traffic: &squid.Traffic{Allowed: 1, BytesToClients: 10}, Reads: 1},
				{Traffic: &squid.Traffic{Allowed: 1, BytesToClients: 10}, Reads: 1},
				{Traffic: &squid.Traffic{Allowed: 5, BytesToClients: 50}, At: defaultTrafficTTL, Reads: 2},
			},
		},
		"ErrorDropsFigure": {
			reason: "A ready pod whose figure cannot be read leaves the instance without one, never a partial sum that looks like a reset.",
			polls: []poll{{pods: []*corev1.Pod{trafficPod("a", true), trafficPod("b", true)},
				lines: map[string]string{"a": line(1, 0)}, errs: map[string]error{"b": errors.New("forbidden")}}},
			want: []result{{Reads: 2}},
		},
		"Garbage": {
			reason: "A line that is not a traffic line is no figure.",
			polls:  []poll{{pods: []*corev1.Pod{trafficPod("a", true)}, lines: map[string]string{"a": "squid: something\n"}}},
			want:   []result{{Reads: 1}},
		},
		"StaleKeptOnError": {
			reason: "A failed read again keeps the last figure, and says how old it is.",
			polls: []poll{
				{pods: []*corev1.Pod{trafficPod("a", true)}, lines: map[string]string{"a": line(2, 0)}},
				{at: defaultTrafficTTL, pods: []*corev1.Pod{trafficPod("a", true)}, errs: map[string]error{"a": errors.New("timeout")}},
			},
			want: []result{
				{Traffic: &squid.Traffic{Allowed: 2, BytesToClients: 20}, Reads: 1},
				{Traffic: &squid.Traffic{Allowed: 2, BytesToClients: 20}, At: 0, Reads: 2},
			},
		},
		"Rollout": {
			reason: "A pod replaced by a rollout retires with its last figure, so the sum does not fall.",
			polls: []poll{
				{pods: []*corev1.Pod{trafficPod("old", true)}, lines: map[string]string{"old": line(9, 2)}},
				{at: defaultTrafficTTL, pods: []*corev1.Pod{trafficPod("new", true)}, lines: map[string]string{"new": line(1, 0)}},
			},
			want: []result{
				{Traffic: &squid.Traffic{Allowed: 9, DeniedDestination: 2, BytesToClients: 90}, Reads: 1},
				{Traffic: &squid.Traffic{Allowed: 10, DeniedDestination: 2, BytesToClients: 100}, At: defaultTrafficTTL, Reads: 2},
			},
		},
		"NoReadyPod": {
			reason: "Without a ready pod there is nothing to report.",
			polls:  []poll{{pods: []*corev1.Pod{trafficPod("a", false)}}},
			want:   []result{{}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			logs := &fakeLogs{}
			b := &Backend{logs: logs, trafficTTL: defaultTrafficTTL}
			var got []result
			for _, p := range tc.polls {
				logs.lines, logs.errs = p.lines, p.errs
				tr, at := b.traffic(t.Context(), testNS, testName, p.pods, t0.Add(p.at))
				r := result{Traffic: tr, Reads: logs.reads}
				if tr != nil {
					r.At = at.Sub(t0)
				}
				got = append(got, r)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\ntraffic(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestTrafficForgotten(t *testing.T) {
	logs := &fakeLogs{lines: map[string]string{"a": line(3, 0)}}
	b := &Backend{logs: logs, trafficTTL: defaultTrafficTTL}
	b.traffic(t.Context(), testNS, testName, []*corev1.Pod{trafficPod("old", true)}, time.Now())
	b.forgetTraffic(testNS, testName)
	if n := len(b.counts.instances); n != 0 {
		t.Errorf("after forgetTraffic the backend still holds %d instances' figures", n)
	}
}
