/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

const testBackend = "kubernetes"

var (
	trafficT1 = time.Unix(1_800_000_000, 0)
	trafficT2 = time.Unix(1_800_000_030, 0)
)

// trafficMR is a managed resource for the traffic metrics.
func trafficMR(ns, name string, uid types.UID) *v1alpha1.KubernetesProxy {
	return &v1alpha1.KubernetesProxy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid}}
}

// exposition is the text format of the series of one resource.
func exposition(ns, name string, t squid.Traffic, at time.Time) string {
	// Labels in the order the text format sorts them.
	b := fmt.Sprintf(`backend=%q`, testBackend)
	l := fmt.Sprintf(`name=%q,namespace=%q`, name, ns)
	return fmt.Sprintf(`%[1]s{%[2]s,decision="allowed",%[3]s,reason=""} %[4]d
%[1]s{%[2]s,decision="denied",%[3]s,reason="destination"} %[5]d
%[1]s{%[2]s,decision="denied",%[3]s,reason="client"} %[6]d
%[1]s{%[2]s,decision="denied",%[3]s,reason="auth"} %[7]d
%[8]s{%[2]s,direction="to_clients",%[3]s} %[9]d
%[8]s{%[2]s,direction="from_clients",%[3]s} %[10]d
%[11]s{%[2]s,%[3]s} %[12]d
`, MetricRequests, b, l, t.Allowed, t.DeniedDestination, t.DeniedClient, t.DeniedAuth,
		MetricBytes, t.BytesToClients, t.BytesFromClients, MetricTrafficTime, at.Unix())
}

// trafficWant is the whole expected exposition: headers, then series.
func trafficWant(series ...string) string {
	if len(series) == 0 {
		return ""
	}
	h := fmt.Sprintf("# HELP %s %s\n# TYPE %s counter\n# HELP %s %s\n# TYPE %s counter\n# HELP %s %s\n# TYPE %s gauge\n",
		MetricRequests, helpRequests, MetricRequests, MetricBytes, helpBytes, MetricBytes, MetricTrafficTime, helpTrafficTime, MetricTrafficTime)
	return h + strings.Join(series, "")
}

func TestTrafficMetrics(t *testing.T) {
	web := trafficMR("team", "web", "uid-1")
	webAgain := trafficMR("team", "web", "uid-2")
	api := trafficMR("", "api", "uid-3")
	small := squid.Traffic{Allowed: 10, DeniedDestination: 2, DeniedClient: 1, DeniedAuth: 3, BytesToClients: 1000, BytesFromClients: 200}
	big := squid.Traffic{Allowed: 15, DeniedDestination: 4, DeniedClient: 1, DeniedAuth: 5, BytesToClients: 1500, BytesFromClients: 300}
	fresh := squid.Traffic{Allowed: 1, BytesToClients: 50, BytesFromClients: 10}
	type step struct {
		mg     *v1alpha1.KubernetesProxy
		t      *squid.Traffic // nil: nothing read on this poll
		at     time.Time
		forget bool
	}
	cases := map[string]struct {
		reason string
		steps  []step
		want   string
	}{
		"NeverRead": {
			reason: "A proxy whose traffic was never read has no series.",
			steps:  []step{{mg: web}},
			want:   trafficWant(),
		},
		"Read": {
			reason: "The counts read are the series, labelled with the resource's namespace and name.",
			steps:  []step{{mg: web, t: &small, at: trafficT1}},
			want:   trafficWant(exposition("team", "web", small, trafficT1)),
		},
		"ClusterScoped": {
			reason: "A cluster-scoped resource has an empty namespace label.",
			steps:  []step{{mg: api, t: &small, at: trafficT1}},
			want:   trafficWant(exposition("", "api", small, trafficT1)),
		},
		"Grows": {
			reason: "Higher counts replace the last ones.",
			steps:  []step{{mg: web, t: &small, at: trafficT1}, {mg: web, t: &big, at: trafficT2}},
			want:   trafficWant(exposition("team", "web", big, trafficT2)),
		},
		"Restarted": {
			reason: "Lower counts mean the source restarted: the last counts are kept and added, so the counters never go down.",
			steps:  []step{{mg: web, t: &small, at: trafficT1}, {mg: web, t: &fresh, at: trafficT2}},
			want:   trafficWant(exposition("team", "web", add(small, fresh), trafficT2)),
		},
		"RestartedTwice": {
			reason: "Every restart adds what the source had counted before it.",
			steps:  []step{{mg: web, t: &small, at: trafficT1}, {mg: web, t: &fresh}, {mg: web, t: &big}, {mg: web, t: &fresh, at: trafficT2}},
			want:   trafficWant(exposition("team", "web", add(add(small, big), fresh), trafficT2)),
		},
		"NotReadKeeps": {
			reason: "A poll that read nothing keeps the counts and their old time, which shows they are stale.",
			steps:  []step{{mg: web, t: &small, at: trafficT1}, {mg: web, at: trafficT2}},
			want:   trafficWant(exposition("team", "web", small, trafficT1)),
		},
		"Forgotten": {
			reason: "A deleted resource's series go.",
			steps:  []step{{mg: web, t: &small, at: trafficT1}, {mg: api, t: &big, at: trafficT2}, {mg: web, forget: true}},
			want:   trafficWant(exposition("", "api", big, trafficT2)),
		},
		"MadeAgain": {
			reason: "A resource made again under the same name starts at its own counts, not on from the old one's.",
			steps:  []step{{mg: web, t: &big, at: trafficT1}, {mg: webAgain, t: &fresh, at: trafficT2}},
			want:   trafficWant(exposition("team", "web", fresh, trafficT2)),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := NewTrafficMetrics()
			for _, s := range tc.steps {
				if s.forget {
					m.forget(testBackend, s.mg)
					continue
				}
				m.record(testBackend, s.mg, s.t, s.at)
			}
			if err := testutil.CollectAndCompare(m, strings.NewReader(tc.want), MetricRequests, MetricBytes, MetricTrafficTime); err != nil {
				t.Errorf("\n%s\n%v", tc.reason, err)
			}
		})
	}
}

func TestTrafficMetricsUnreadTime(t *testing.T) {
	m := NewTrafficMetrics()
	m.now = func() time.Time { return trafficT2 }
	web := trafficMR("team", "web", "uid-1")
	m.record(testBackend, web, &squid.Traffic{}, time.Time{})
	want := trafficWant(exposition("team", "web", squid.Traffic{}, trafficT2))
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), MetricTrafficTime); err != nil {
		t.Errorf("A backend that does not say when it read the counts gets the time of the poll:\n%v", err)
	}
}

// TestExternalTraffic shows External feeds the metrics from Observe and
// deletes a resource's series when it or its instance goes.
func TestExternalTraffic(t *testing.T) {
	counts := squid.Traffic{Allowed: 7, DeniedDestination: 5, DeniedAuth: 3, DeniedClient: 2, BytesToClients: 900, BytesFromClients: 90}
	withTraffic := backend.Observation[kobs]{Ready: true, UpToDate: true, Endpoint: extEndpoint, Traffic: &counts, TrafficAt: trafficT1}
	serving := backend.Fns[kparams, kobs]{ObserveFn: func(context.Context, backend.Desired[kparams]) (backend.Observation[kobs], error) {
		return withTraffic, nil
	}}
	gone := backend.Fns[kparams, kobs]{ObserveFn: failing(backend.NotFound(errBoom))}
	recorded := trafficWant(exposition("team", "web", counts, trafficT1))
	cases := map[string]struct {
		reason string
		then   func(t *testing.T, m *TrafficMetrics)
		want   string
	}{
		"Observed": {
			reason: "A successful Observe records the traffic it read.",
			then:   func(*testing.T, *TrafficMetrics) {},
			want:   recorded,
		},
		"InstanceGone": {
			reason: "An Observe that finds no instance deletes the series.",
			then: func(t *testing.T, m *TrafficMetrics) {
				observeWith(t, m, gone, extMR())
			},
			want: trafficWant(),
		},
		"ResourceDeleted": {
			reason: "An Observe of a resource being deleted deletes the series, also when its instance stays (deletionPolicy Orphan).",
			then: func(t *testing.T, m *TrafficMetrics) {
				observeWith(t, m, serving, extMR(withDeletion()))
			},
			want: trafficWant(),
		},
		"Delete": {
			reason: "Delete deletes the series.",
			then: func(t *testing.T, m *TrafficMetrics) {
				e := NewExternal[*v1alpha1.KubernetesProxy, kparams, kobs](testKind{}, backend.Fns[kparams, kobs]{DeleteFn: func(context.Context, backend.Desired[kparams]) error { return nil }}, &test.MockClient{}, "test", testKey).WithTraffic(m, testBackend)
				if _, err := e.Delete(t.Context(), extMR()); err != nil {
					t.Fatal(err)
				}
			},
			want: trafficWant(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := NewTrafficMetrics()
			observeWith(t, m, serving, extMR())
			tc.then(t, m)
			if err := testutil.CollectAndCompare(m, strings.NewReader(tc.want), MetricRequests, MetricBytes, MetricTrafficTime); err != nil {
				t.Errorf("\n%s\n%v", tc.reason, err)
			}
		})
	}
}

func observeWith(t *testing.T, m *TrafficMetrics, b backend.Fns[kparams, kobs], mg *v1alpha1.KubernetesProxy) {
	t.Helper()
	e := NewExternal[*v1alpha1.KubernetesProxy, kparams, kobs](testKind{}, b, &test.MockClient{MockGet: givenSecret(alice)}, "test", testKey).WithTraffic(m, testBackend)
	if _, err := e.Observe(t.Context(), mg); err != nil {
		t.Fatal(err)
	}
}
