/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's matchers too.
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/traffic"
)

// The provider's traffic metrics (internal/controller/proxy/traffic.go).
const (
	metricRequests  = "egressproxy_proxy_requests_total"
	metricTimestamp = "egressproxy_proxy_traffic_timestamp_seconds"
	// countsLag bounds how old a pod's printed counts may be when the
	// provider reads them: awk writes them within a second or two (the
	// readiness probe's log lines), the traffic container prints them
	// every 10 s.
	countsLag = 15 * time.Second
	// metricsTimeout bounds the wait for fresh counts: the provider reads
	// them at each poll (--traffic-interval, 1 m, for a watched proxy),
	// at most every 30 s per pod.
	metricsTimeout = 4 * time.Minute
)

// trafficCounts are the request counts of one proxy, by "decision/reason".
type trafficCounts map[string]float64

// countsTraffic sends known traffic through the proxy and reads the same
// counts back from the provider's metrics, as deltas: N allowed, M refused
// for their destination, K without credentials, and some from a client
// outside allowedClientCIDRs. It also finds a request's line in the
// proxy's access log, with its fields and without the password.
func (r *backendRun) countsTraffic(ctx SpecContext) {
	r.trafficOrSkip()
	mr := r.last.mr
	labels := map[string]string{"backend": string(r.bc.backend), "namespace": mr.GetNamespace(), "name": mr.GetName()}

	// The counts of the earlier specs' requests must be in "before".
	before := settledCounts(ctx, labels, time.Now())
	const allowed, deniedDest, noCreds, outside = 7, 5, 3, 2
	c := r.client(ctx, Default)
	send := func(n int, what string, want int, fn func() (traffic.Result, error)) {
		for range n {
			res, err := fn()
			Expect(err).NotTo(HaveOccurred(), what)
			Expect(res.Code).To(Equal(want), "%s: %s", what, res)
		}
	}
	allowedURL, otherURL := "http://"+traffic.AllowedOrigin+"/", "http://"+traffic.OtherOrigin+"/"
	sent := time.Now()
	send(allowed, "GET an allowed host", http.StatusOK, func() (traffic.Result, error) { return c.Get(ctx, allowedURL) })
	send(deniedDest, "GET a host not allowed", http.StatusForbidden, func() (traffic.Result, error) { return c.Get(ctx, otherURL) })
	send(noCreds, "GET without credentials", http.StatusProxyAuthRequired, func() (traffic.Result, error) { return c.As(nil).Get(ctx, allowedURL) })
	send(outside, "GET from outside allowedClientCIDRs", http.StatusForbidden, func() (traffic.Result, error) {
		return c.From(traffic.OutsideClient).Get(ctx, allowedURL)
	})
	done := time.Now()
	want := trafficCounts{"allowed/": allowed, "denied/destination": deniedDest, "denied/auth": noCreds, "denied/client": outside}
	var got trafficCounts
	timed(string(r.bc.backend)+": requests sent -> counted in the provider's metrics", func() {
		Eventually(ctx, func(g Gomega) {
			after, at := scrapeCounts(ctx, g, labels)
			g.Expect(at).To(BeTemporally(">=", done), "the provider's last read of the proxy's traffic, after the last request")
			got = trafficCounts{}
			for k, v := range after {
				if d := v - before[k]; d != 0 {
					got[k] = d
				}
			}
			g.Expect(got).To(Equal(want), "traffic read at %s, requests sent from %s", at.Format(time.TimeOnly), sent.Format(time.TimeOnly))
		}).WithTimeout(metricsTimeout).WithPolling(5 * time.Second).Should(Succeed())
	})
	AddReportEntry(string(r.bc.backend)+": traffic counted", fmt.Sprint(got))

	if r.bc.accessLog != nil {
		var line string
		// A VM's journal gets the line within a second; the pods' logs at
		// once: allow for a loaded machine.
		Eventually(ctx, func(g Gomega) {
			line = accessLine(g, r.bc.accessLog(ctx, g, mr), traffic.AllowedOrigin)
		}).WithTimeout(time.Minute).WithPolling(5 * time.Second).Should(Succeed())
		AddReportEntry(string(r.bc.backend)+": an access log line", line)
	}
}

// settledCounts waits until the provider has read the proxy's counts after
// since (plus countsLag, for the counts the pods print), and then read the
// same counts again on a later read, and returns them. A read after since
// may still miss earlier requests: a GCE guest counts squid's access log
// from its journal and writes the counts with its state report (every
// GuestReportInterval), the time the provider reports for them, and the
// provider reads them on its poll. Counts that stayed the same from one
// read to the next hold every request sent before.
func settledCounts(ctx context.Context, labels map[string]string, since time.Time) trafficCounts {
	GinkgoHelper()
	var first trafficCounts
	var firstAt time.Time
	Eventually(ctx, func(g Gomega) {
		counts, at := scrapeCounts(ctx, g, labels)
		g.Expect(at).To(BeTemporally(">=", since.Add(countsLag)), "the provider's last read of the proxy's traffic")
		if first == nil || !maps.Equal(first, counts) {
			first, firstAt = counts, at
		}
		g.Expect(at).To(BeTemporally(">", firstAt), "a later read of the proxy's traffic with the same counts %v", first)
	}).WithTimeout(metricsTimeout).WithPolling(5 * time.Second).Should(Succeed())
	return first
}

// metricLine is one sample of the Prometheus text format.
var (
	metricLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)$`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// scrapeCounts reads the provider's metrics and returns the request counts
// of the proxy labels names, and when they were read on the proxy.
func scrapeCounts(ctx context.Context, g Gomega, labels map[string]string) (trafficCounts, time.Time) {
	metrics, err := env.c.ProviderMetrics(ctx)
	g.Expect(err).NotTo(HaveOccurred(), "scraping the provider's metrics")
	counts, at := trafficCounts{}, time.Time{}
	sc := bufio.NewScanner(strings.NewReader(metrics))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := metricLine.FindStringSubmatch(sc.Text())
		if m == nil || (m[1] != metricRequests && m[1] != metricTimestamp) {
			continue
		}
		l := map[string]string{}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			l[p[1]] = p[2]
		}
		if l["backend"] != labels["backend"] || l["namespace"] != labels["namespace"] || l["name"] != labels["name"] {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		g.Expect(err).NotTo(HaveOccurred(), sc.Text())
		if m[1] == metricTimestamp {
			at = time.Unix(0, int64(v*float64(time.Second)))
			continue
		}
		counts[l["decision"]+"/"+l["reason"]] = v
	}
	g.Expect(sc.Err()).NotTo(HaveOccurred())
	g.Expect(at.IsZero()).To(BeFalse(), "the provider reports no traffic for %v", labels)
	return counts, at
}

// kubernetesAccessLog returns the logs of the squid container of the
// proxy's pods (pods/log), where its access log goes.
func kubernetesAccessLog(ctx context.Context, g Gomega, mr *unstructured.Unstructured) string {
	cs, err := kubernetes.NewForConfig(env.c.Config)
	g.Expect(err).NotTo(HaveOccurred())
	ns := str(mr, "spec", "forProvider", "namespace")
	id := str(mr, "status", "atProvider", "instanceID")
	pods := &corev1.PodList{}
	g.Expect(env.c.Client.List(ctx, pods, client.InNamespace(ns),
		client.MatchingLabels{"app.kubernetes.io/instance": id[strings.LastIndex(id, "/")+1:]})).To(Succeed())
	g.Expect(pods.Items).NotTo(BeEmpty())
	var logs strings.Builder
	for _, p := range pods.Items {
		rc, err := cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: "squid", TailLines: ptr.To[int64](2000)}).Stream(ctx)
		g.Expect(err).NotTo(HaveOccurred(), "reading the logs of pod %s (pods/log)", p.Name)
		b, err := io.ReadAll(rc)
		_ = rc.Close()
		g.Expect(err).NotTo(HaveOccurred())
		logs.Write(b)
		logs.WriteString("\n")
	}
	return logs.String()
}

// accessLine returns an access log line of log for a 200 from host: one
// JSON object with the fields docs/platform.md names, the user's name and,
// in the whole log, never a password.
func accessLine(g Gomega, log, host string) string {
	for _, pw := range []string{trafficPassword, rotatedPassword} {
		g.Expect(log).NotTo(ContainSubstring(pw), "the access log holds a password")
	}
	var found string
	for _, l := range strings.Split(log, "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(l), &e) != nil || !strings.Contains(fmt.Sprint(e["url"]), host) || e["status"] != float64(http.StatusOK) {
			continue
		}
		g.Expect(e).To(SatisfyAll(HaveKey("time"), HaveKey("client"), HaveKey("method"), HaveKey("url"),
			HaveKey("status"), HaveKey("result"), HaveKey("bytes_sent"), HaveKey("bytes_received")), l)
		g.Expect(e["user"]).To(Equal(trafficUser), l)
		found = l
	}
	g.Expect(found).NotTo(BeEmpty(), "no access log line of a 200 for %s", host)
	return found
}
