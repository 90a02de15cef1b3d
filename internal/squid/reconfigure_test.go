/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package squid

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Figures of the reconfigure measurement. They are a measurement, not a
// bound: the test logs what it saw and fails only when it could not measure.
const (
	blinkRate          = 200 // new connections per second
	blinkWorkers       = 16
	blinkReconfigures  = 5
	blinkSpacing       = 2 * time.Second
	blinkClient        = "127.0.0.2" // the load's source; the guard drops its SYNs
	blinkRequestBudget = 5 * time.Second
)

// blinkResult is what one request of the load saw.
type blinkResult struct {
	start   time.Time
	latency time.Duration
	outcome string // "ok", or the kind of failure
}

// TestReconfigureBlink measures what `squid -k reconfigure` does to new
// connections: squid 5 closes and reopens its listening port on a
// reconfigure, so a client connecting in that window may be refused or
// reset. It runs ~200 new connections per second (one plain GET each)
// through a real squid while it reconfigures five times with a changed
// configuration, without and then with the SYN guard a VM's apply script can
// use (an nft rule that drops new SYNs from clients for the reconfigure, so
// they retransmit after ~1 s instead of being refused). It logs the figures.
func TestReconfigureBlink(t *testing.T) {
	if testing.Short() {
		t.Skip("a measurement of ~30 s")
	}
	e := startProxyEnv(t, func(c *Config) { c.ClientCIDRs = []string{"127.0.0.0/8"} }, nil)
	bin := squidBinary(t)
	conf := e.dir.file("squid.conf")

	t.Run("Plain", func(t *testing.T) {
		runBlink(t, e, func(i int) time.Duration { return reconfigure(t, bin, conf, e.dir.file("cache.log"), i) })
	})
	t.Run("SYNGuard", func(t *testing.T) {
		if _, err := exec.LookPath("nft"); err != nil {
			t.Skip("no nft: cannot measure the SYN guard")
		}
		port := e.proxy[strings.LastIndex(e.proxy, ":")+1:]
		table := "egressproxy_blink_" + strconv.Itoa(os.Getpid())
		if out, err := nft(table, port); err != nil {
			t.Skipf("cannot load an nft table (CAP_NET_ADMIN?): %v: %s", err, out)
		}
		deleteTable(table)
		t.Cleanup(func() { deleteTable(table) })
		runBlink(t, e, func(i int) time.Duration {
			start := time.Now()
			if out, err := nft(table, port); err != nil {
				t.Fatalf("nft: %v: %s", err, out)
			}
			// Let squid take what is already in its backlog.
			time.Sleep(100 * time.Millisecond)
			reconfigure(t, bin, conf, e.dir.file("cache.log"), i)
			deleteTable(table)
			return time.Since(start).Round(time.Millisecond)
		})
	})
}

// runBlink runs the load, calls reconf blinkReconfigures times, and logs
// what the load saw around them.
func runBlink(t *testing.T, e proxyEnv, reconf func(i int) time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := "GET " + e.plainURL("allowed.test") + " HTTP/1.1\r\nHost: allowed.test:" + e.plainPort +
		"\r\nProxy-Authorization: Basic " + basicAuth(testUser, testPass) + "\r\nConnection: close\r\n\r\n"

	var mu sync.Mutex
	var results []blinkResult
	var wg sync.WaitGroup
	every := time.Second * blinkWorkers / blinkRate
	for range blinkWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				r := blinkRequest(e.proxy, req)
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
			}
		}()
	}
	time.Sleep(blinkSpacing)
	var took []time.Duration
	var at []time.Time
	for i := range blinkReconfigures {
		at = append(at, time.Now())
		took = append(took, reconf(i))
		time.Sleep(blinkSpacing)
	}
	cancel()
	wg.Wait()

	outcomes := map[string]int{}
	var lat []time.Duration
	slow := 0
	for _, r := range results {
		outcomes[r.outcome]++
		if r.outcome == "ok" {
			lat = append(lat, r.latency)
			if r.latency > 900*time.Millisecond {
				slow++
			}
		}
	}
	if outcomes["ok"] == 0 {
		t.Fatalf("no request succeeded: %v", outcomes)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	failed := len(results) - outcomes["ok"]
	t.Logf("%d requests at ~%d new connections/s, %d reconfigures (each took %v): %d failed (%v); ok p50 %v p99 %v max %v, %d ok slower than 900ms (a retransmitted SYN)",
		len(results), blinkRate, blinkReconfigures, took, failed, outcomes,
		lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*99/100].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond), slow)
	for i, a := range at {
		n := 0
		for _, r := range results {
			if r.outcome != "ok" && r.start.After(a.Add(-time.Second)) && r.start.Before(a.Add(blinkSpacing)) {
				n++
			}
		}
		t.Logf("reconfigure %d: %d failures started within -1s..+%s of it", i+1, n, blinkSpacing)
	}
}

// blinkRequest sends req on a new connection from blinkClient and classifies
// what happens.
func blinkRequest(proxy, req string) blinkResult {
	r := blinkResult{start: time.Now()}
	d := net.Dialer{Timeout: blinkRequestBudget, LocalAddr: &net.TCPAddr{IP: net.ParseIP(blinkClient)}}
	c, err := d.Dial("tcp", proxy)
	if err != nil {
		r.outcome = "dial: " + errKind(err)
		return r
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(r.start.Add(blinkRequestBudget))
	if _, err := io.WriteString(c, req); err != nil {
		r.outcome = "write: " + errKind(err)
		return r
	}
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	if err != nil {
		r.outcome = "read status: " + errKind(err)
		return r
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		r.outcome = "read body: " + errKind(err)
		return r
	}
	r.latency = time.Since(r.start)
	if f := strings.Fields(status); len(f) < 2 || f[1] != "200" {
		r.outcome = "status: " + strings.TrimSpace(status)
		return r
	}
	r.outcome = "ok"
	return r
}

func errKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "reset"
	case errors.Is(err, io.EOF):
		return "eof"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return err.Error()
}

// reconfigure changes the configuration (one more allowed name each time,
// as an allowlist change does), runs `squid -k reconfigure` and returns how
// long it took until squid listened again (its cache.log says so).
func reconfigure(t *testing.T, bin, conf, cacheLog string, i int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(conf) //nolint:gosec // The test's own config.
	if err != nil {
		t.Fatal(err)
	}
	anchor := "acl " + aclDstNames + " dstdomain -n allowed.test\n"
	if !strings.Contains(string(b), anchor) {
		t.Fatalf("no %q in the config", anchor)
	}
	b = []byte(strings.Replace(string(b), anchor, anchor+fmt.Sprintf("acl %s dstdomain -n extra%d.test\n", aclDstNames, i), 1))
	if err := os.WriteFile(conf, b, 0o644); err != nil { //nolint:gosec // squid's user reads it.
		t.Fatal(err)
	}
	const listening = "Accepting HTTP Socket connections"
	before := strings.Count(readFile(cacheLog), listening)
	start := time.Now()
	if out, err := exec.Command(bin, "-k", "reconfigure", "-f", conf).CombinedOutput(); err != nil { //nolint:gosec,noctx // The test's own squid.
		t.Fatalf("squid -k reconfigure: %v: %s", err, out)
	}
	// squid handles the signal in its event loop; wait until it has closed
	// and reopened the port.
	deadline := start.Add(10 * time.Second)
	for strings.Count(readFile(cacheLog), listening) == before {
		if time.Now().After(deadline) {
			t.Fatalf("squid did not listen again within 10s of a reconfigure:\n%s", readFile(cacheLog))
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start).Round(time.Millisecond)
}

// nft loads a table that drops new connections from blinkClient to port.
func nft(table, port string) ([]byte, error) {
	rules := "table inet " + table + " {\n chain input {\n  type filter hook input priority -10; policy accept;\n" +
		"  ip saddr " + blinkClient + " tcp dport " + port + " tcp flags & (syn | ack) == syn drop\n }\n}\n"
	cmd := exec.Command("nft", "-f", "-") //nolint:noctx // A short command.
	cmd.Stdin = strings.NewReader(rules)
	return cmd.CombinedOutput()
}

func deleteTable(table string) {
	_ = exec.Command("nft", "delete", "table", "inet", table).Run() //nolint:gosec,noctx // The test's own table.
}
