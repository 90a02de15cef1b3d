/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// Label values of the traffic metrics.
const (
	DecisionAllowed = "allowed"
	DecisionDenied  = "denied"

	ReasonDestination = "destination"
	ReasonClient      = "client"
	ReasonAuth        = "auth"

	DirectionToClients   = "to_clients"
	DirectionFromClients = "from_clients"
)

// Names and help of the traffic metrics.
const (
	MetricRequests    = "egressproxy_proxy_requests_total"
	MetricBytes       = "egressproxy_proxy_bytes_total"
	MetricTrafficTime = "egressproxy_proxy_traffic_timestamp_seconds"

	helpRequests    = "Requests a proxy's squid handled, by decision and, for denials, reason: destination (not allowed, private, metadata, port or method), client (outside allowedClientCIDRs) or auth (no or wrong credentials)."
	helpBytes       = "Bytes a proxy's squid sent to (to_clients) and read from (from_clients) its clients."
	helpTrafficTime = "When the proxy's traffic counts were last read on its instance (Unix time); an old one means stale counts."
)

var (
	trafficLabels = []string{"backend", "namespace", "name"}

	descRequests    = prometheus.NewDesc(MetricRequests, helpRequests, append(trafficLabels, "decision", "reason"), nil)
	descBytes       = prometheus.NewDesc(MetricBytes, helpBytes, append(trafficLabels, "direction"), nil)
	descTrafficTime = prometheus.NewDesc(MetricTrafficTime, helpTrafficTime, trafficLabels, nil)
)

// trafficKey names the series of one managed resource.
type trafficKey struct{ backend, namespace, name string }

// trafficSeries is what the metrics show for one managed resource: the
// counts its instance reports now (last) plus those of instances (pods,
// VMs, squids) that restarted or went away since (retired).
type trafficSeries struct {
	uid     types.UID
	last    squid.Traffic
	retired squid.Traffic
	at      time.Time
}

// TrafficMetrics is a prometheus.Collector of the data plane's traffic,
// fed by each successful Observe. A proxy's counters start again when its
// squid does (a restart, a replaced VM); the metrics stay monotonic: a count
// lower than the last one means the source restarted, so the last counts
// are kept as retired and added to what it reports from then on. A provider
// restart starts every series at zero again, which Prometheus' rate() takes
// as the counter reset it is.
type TrafficMetrics struct {
	mu     sync.Mutex
	series map[trafficKey]*trafficSeries
	now    func() time.Time
}

// NewTrafficMetrics returns an empty TrafficMetrics. Register it once per
// process.
func NewTrafficMetrics() *TrafficMetrics {
	return &TrafficMetrics{series: map[trafficKey]*trafficSeries{}, now: time.Now}
}

func keyOf(backendName string, mg resource.Managed) trafficKey {
	return trafficKey{backend: backendName, namespace: mg.GetNamespace(), name: mg.GetName()}
}

// record takes the traffic an Observe of mg reported; nil (not read on this
// poll) keeps the last counts and their time, so the timestamp shows how
// stale they are.
func (m *TrafficMetrics) record(backendName string, mg resource.Managed, t *squid.Traffic, at time.Time) {
	if m == nil || t == nil {
		return
	}
	if at.IsZero() {
		at = m.now()
	}
	k := keyOf(backendName, mg)
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.series[k]
	if !ok || s.uid != mg.GetUID() {
		// A new resource, or one made again under the same name.
		s = &trafficSeries{uid: mg.GetUID()}
		m.series[k] = s
	}
	if restarted(s.last, *t) {
		s.retired = add(s.retired, s.last)
	}
	s.last = *t
	s.at = at
}

// forget deletes the series of mg: its resource is gone.
func (m *TrafficMetrics) forget(backendName string, mg resource.Managed) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.series, keyOf(backendName, mg))
}

// restarted tells whether now counts from a fresh start rather than on from
// last: some count went down.
func restarted(last, now squid.Traffic) bool {
	return now.Allowed < last.Allowed || now.DeniedDestination < last.DeniedDestination ||
		now.DeniedClient < last.DeniedClient || now.DeniedAuth < last.DeniedAuth ||
		now.BytesToClients < last.BytesToClients || now.BytesFromClients < last.BytesFromClients
}

func add(a, b squid.Traffic) squid.Traffic {
	return squid.Traffic{
		Allowed:           a.Allowed + b.Allowed,
		DeniedDestination: a.DeniedDestination + b.DeniedDestination,
		DeniedClient:      a.DeniedClient + b.DeniedClient,
		DeniedAuth:        a.DeniedAuth + b.DeniedAuth,
		BytesToClients:    a.BytesToClients + b.BytesToClients,
		BytesFromClients:  a.BytesFromClients + b.BytesFromClients,
	}
}

// Describe implements prometheus.Collector.
func (m *TrafficMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- descRequests
	ch <- descBytes
	ch <- descTrafficTime
}

// Collect implements prometheus.Collector.
func (m *TrafficMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, s := range m.series {
		t := add(s.retired, s.last)
		l := []string{k.backend, k.namespace, k.name}
		counter := func(d *prometheus.Desc, v uint64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append(l, extra...)...)
		}
		counter(descRequests, t.Allowed, DecisionAllowed, "")
		counter(descRequests, t.DeniedDestination, DecisionDenied, ReasonDestination)
		counter(descRequests, t.DeniedClient, DecisionDenied, ReasonClient)
		counter(descRequests, t.DeniedAuth, DecisionDenied, ReasonAuth)
		counter(descBytes, t.BytesToClients, DirectionToClients)
		counter(descBytes, t.BytesFromClients, DirectionFromClients)
		ch <- prometheus.MustNewConstMetric(descTrafficTime, prometheus.GaugeValue, float64(s.at.UnixNano())/1e9, l...)
	}
}
