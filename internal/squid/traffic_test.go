/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package squid

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

func TestParseTraffic(t *testing.T) {
	full := Traffic{Allowed: 1, DeniedDestination: 2, DeniedClient: 3, DeniedAuth: 4, BytesToClients: 1 << 40, BytesFromClients: 6}
	cases := map[string]struct {
		reason string
		line   string
		want   Traffic
		ok     bool
	}{
		"RoundTrip":     {"String's output parses back.", full.String(), full, true},
		"Whitespace":    {"A trailing newline (cat of the file) is fine.", "  " + full.String() + "\n", full, true},
		"UnknownField":  {"A newer guest may add fields.", full.String() + " later=7", full, true},
		"Empty":         {"No line, no figures.", "", Traffic{}, false},
		"OtherPrefix":   {"Another program's line is not traffic.", "traffic allowed=1", Traffic{}, false},
		"MissingField":  {"Every field must be there.", "egressproxy-traffic allowed=1", Traffic{}, false},
		"NotANumber":    {"A value must be a count.", strings.Replace(full.String(), "allowed=1", "allowed=x", 1), Traffic{}, false},
		"Negative":      {"A count is never negative.", strings.Replace(full.String(), "allowed=1", "allowed=-1", 1), Traffic{}, false},
		"NoEqualsSign":  {"A field is key=value.", full.String() + " junk", Traffic{}, false},
		"HalfWrittenNo": {"A cut line is refused, not read as smaller counts.", full.String()[:40], Traffic{}, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := ParseTraffic(tc.line)
			if ok != tc.ok {
				t.Errorf("\n%s\nParseTraffic(%q): ok %v, want %v", tc.reason, tc.line, ok, tc.ok)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nParseTraffic(%q): -want, +got:\n%s", tc.reason, tc.line, diff)
			}
		})
	}
}

func TestTrafficAWKHasNoSingleQuote(t *testing.T) {
	if strings.Contains(TrafficAWK, "'") {
		t.Error("TrafficAWK must not hold a single quote: backends pass it in a shell's single quotes")
	}
}

// TestTrafficAWKLines runs TrafficAWK (real mawk) over hand-written lines for
// the cases a short squid run does not produce; TestTrafficAWKWithSquid
// covers squid's own lines.
func TestTrafficAWKLines(t *testing.T) {
	awk := testenv.LookPath(t, "mawk", "Debian package mawk")
	line := func(client, user, url string, status int, result string, sent, received string) string {
		return `{"time":"2026-12-07T10:00:00Z","duration_ms":1,"client":"` + client + `","user":"` + user + `","method":"GET","url":"` + url +
			`","host":"h","status":` + strconv.Itoa(status) + `,"bytes_sent":` + sent + `,"bytes_received":` + received + `,"result":"` + result + `","server":"-"}`
	}
	cases := map[string]struct {
		reason  string
		lines   []string
		printed []string // nil: every line
		want    Traffic
	}{
		"SyslogPrefix": {
			reason: "A line with a syslog prefix before the JSON counts the same.",
			lines:  []string{"Dec  7 10:00:00 vm squid[42]: " + line("10.0.0.1", "a", "http://x/", 200, "TCP_MISS", "10", "20")},
			want:   Traffic{Allowed: 1, BytesToClients: 10, BytesFromClients: 20},
		},
		"Classes": {
			reason: "Each class of TCP_DENIED line; an origin's own 407 or 403 is an allowed request.",
			lines: []string{
				line("10.0.0.1", "-", "http://x/", 407, "TCP_DENIED", "1", "1"),
				line("10.0.0.1", "a", "http://x/", 407, "TCP_DENIED", "1", "1"),
				line("10.0.0.1", "-", "http://x/", 403, "TCP_DENIED", "1", "1"),
				line("10.0.0.1", "a", "http://x/", 403, "TCP_DENIED", "1", "1"),
				line("10.0.0.1", "a", "http://x/", 403, "TCP_DENIED_REPLY", "1", "1"),
				line("10.0.0.1", "a", "http://x/", 407, "TCP_MISS", "1", "1"),
				line("10.0.0.1", "a", "http://x/", 403, "TCP_MISS", "1", "1"),
				line("10.0.0.1", "a", "x:443", 200, "TCP_TUNNEL", "1", "1"),
				line("10.0.0.1", "a", "http://x/", 503, "NONE_NONE", "1", "1"),
			},
			want: Traffic{Allowed: 4, DeniedAuth: 2, DeniedClient: 1, DeniedDestination: 2, BytesToClients: 9, BytesFromClients: 9},
		},
		"Probes": {
			reason: "The provider's probes from loopback and closed-before-request connections are neither printed nor counted.",
			lines: []string{
				line("127.0.0.1", "-", ProbeURL, 403, "TCP_DENIED", "3000", "50"),
				line("::1", "-", ProbeURL, 407, "TCP_DENIED", "3000", "50"),
				line("10.0.0.9", "-", "error:transaction-end-before-headers", 0, "NONE_NONE", "0", "0"),
			},
			printed: []string{},
			want:    Traffic{},
		},
		"ProbeURLFromAClient": {
			reason: "A client cannot hide a request behind the probe URL: only loopback's is skipped.",
			lines:  []string{line("10.0.0.1", "a", ProbeURL, 403, "TCP_DENIED", "3", "5")},
			want:   Traffic{DeniedDestination: 1, BytesToClients: 3, BytesFromClients: 5},
		},
		"ErrorLines": {
			reason: "A malformed request is printed and its bytes counted, but it is no request of any class.",
			lines:  []string{line("10.0.0.1", "-", "error:invalid-request", 400, "NONE_NONE", "300", "7")},
			want:   Traffic{BytesToClients: 300, BytesFromClients: 7},
		},
		"OtherLines": {
			reason: "Lines that are not access log lines pass through uncounted; a missing byte count is zero.",
			lines:  []string{"squid said something", line("10.0.0.1", "a", "http://x/", 200, "TCP_MISS", "-", "-")},
			want:   Traffic{Allowed: 1},
		},
		"LargeCounts": {
			reason: "Byte counts beyond 32 bits add up exactly.",
			lines:  []string{line("10.0.0.1", "a", "http://x/", 200, "TCP_MISS", "4294967296", "1"), line("10.0.0.1", "a", "http://x/", 200, "TCP_MISS", "4294967297", "1")},
			want:   Traffic{Allowed: 2, BytesToClients: 8589934593, BytesFromClients: 2},
		},
		"Quotes": {
			reason: "An escaped quote in a client's URL cannot fake a field.",
			lines:  []string{line("10.0.0.1", "a", `http://x/\",\"status\":407,\"result\":\"TCP_DENIED`, 200, "TCP_MISS", "1", "1")},
			want:   Traffic{Allowed: 1, BytesToClients: 1, BytesFromClients: 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			printed, b := runTrafficAWK(t, awk, tc.lines)
			want := tc.printed
			if want == nil {
				want = tc.lines
			}
			if diff := cmp.Diff(want, printed); diff != "" {
				t.Errorf("\n%s\nprinted: -want, +got:\n%s", tc.reason, diff)
			}
			got, ok := ParseTraffic(b)
			if !ok {
				t.Fatalf("\n%s\ntraffic file %q does not parse", tc.reason, b)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\ntraffic: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// runTrafficAWK runs TrafficAWK with awk and args over lines, and returns
// the lines it printed and the traffic file it wrote.
func runTrafficAWK(t *testing.T, awk string, lines []string, args ...string) ([]string, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "traffic")
	cmd := exec.Command(awk, append(args, "-v", "out="+out, TrafficAWK)...) //nolint:gosec,noctx // The test's own awk.
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	printed, err := cmd.Output()
	if err != nil {
		t.Fatalf("awk: %v", err)
	}
	b, err := os.ReadFile(out) //nolint:gosec // The test's own file.
	if err != nil {
		t.Fatal(err)
	}
	return splitLines(string(printed)), string(b)
}

func splitLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return []string{}
	}
	return strings.Split(s, "\n")
}

// TestTrafficAWKJournal runs TrafficAWK (real mawk) in journal mode over
// lines as journalctl --output=json prints them.
func TestTrafficAWKJournal(t *testing.T) {
	awk := testenv.LookPath(t, "mawk", "Debian package mawk")
	// entry is a journal entry whose MESSAGE is squid's line, escaped once
	// more as JSON.
	entry := func(seqid string, seq int, url string, status int, result string) string {
		msg := `{"time":"2026-12-07T10:00:00Z","client":"10.0.0.1","user":"a","method":"GET","url":"` + url +
			`","host":"h","status":` + strconv.Itoa(status) + `,"bytes_sent":1,"bytes_received":1,"result":"` + result + `","server":"-"}`
		m, _ := json.Marshal(msg)
		return fmt.Sprintf(`{"__CURSOR":"s=%s;i=%x;b=b;m=1;t=2;x=3","__REALTIME_TIMESTAMP":"1","MESSAGE":%s}`, seqid, seq, m)
	}
	cases := map[string]struct {
		reason     string
		lines      []string
		printed    []string
		want       Traffic
		wantCursor string
	}{
		"Counts": {
			reason:     "Each entry's message counts as squid's line; the last entry's cursor is saved.",
			lines:      []string{entry("s1", 1, "http://x/", 200, "TCP_MISS"), entry("s1", 2, "http://x/", 407, "TCP_DENIED")},
			want:       Traffic{Allowed: 1, DeniedAuth: 1, BytesToClients: 2, BytesFromClients: 2},
			wantCursor: "s=s1;i=2;b=b;m=1;t=2;x=3",
		},
		"Duplicates": {
			reason:     "An entry at or before the last one read (a rotation can show one twice) is not counted again.",
			lines:      []string{entry("s1", 0x1f, "http://x/", 200, "TCP_MISS"), entry("s1", 0x1f, "http://x/", 200, "TCP_MISS"), entry("s1", 0x1e, "http://x/", 200, "TCP_MISS")},
			want:       Traffic{Allowed: 1, BytesToClients: 1, BytesFromClients: 1},
			wantCursor: "s=s1;i=1f;b=b;m=1;t=2;x=3",
		},
		"NewSequence": {
			reason:     "Another sequence ID (a new journal) starts its numbers again.",
			lines:      []string{entry("s1", 9, "http://x/", 200, "TCP_MISS"), entry("s2", 1, "http://x/", 200, "TCP_MISS")},
			want:       Traffic{Allowed: 2, BytesToClients: 2, BytesFromClients: 2},
			wantCursor: "s=s2;i=1;b=b;m=1;t=2;x=3",
		},
		"Quotes": {
			reason:     "An escaped quote in a client's URL, escaped again by the journal, cannot fake a field.",
			lines:      []string{entry("s1", 1, `http://x/\",\"status\":407,\"result\":\"TCP_DENIED`, 200, "TCP_MISS")},
			printed:    []string{`{"time":"2026-12-07T10:00:00Z","client":"10.0.0.1","user":"a","method":"GET","url":"http://x/\",\"status\":407,\"result\":\"TCP_DENIED","host":"h","status":200,"bytes_sent":1,"bytes_received":1,"result":"TCP_MISS","server":"-"}`},
			want:       Traffic{Allowed: 1, BytesToClients: 1, BytesFromClients: 1},
			wantCursor: "s=s1;i=1;b=b;m=1;t=2;x=3",
		},
		"NotText": {
			reason:     "A message journald keeps as bytes, or did not print, is not counted; its cursor is still read.",
			lines:      []string{`{"__CURSOR":"s=s1;i=5;b=b;m=1;t=2;x=3","MESSAGE":[123,34]}`, `{"__CURSOR":"s=s1;i=6;b=b;m=1;t=2;x=3","MESSAGE":null}`, entry("s1", 7, "http://x/", 200, "TCP_MISS")},
			want:       Traffic{Allowed: 1, BytesToClients: 1, BytesFromClients: 1},
			wantCursor: "s=s1;i=7;b=b;m=1;t=2;x=3",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			printed, b := runTrafficAWK(t, awk, tc.lines, "-v", "journal=1")
			if tc.printed != nil {
				if diff := cmp.Diff(tc.printed, printed); diff != "" {
					t.Errorf("\n%s\nprinted: -want, +got:\n%s", tc.reason, diff)
				}
			}
			got, ok := ParseTraffic(b)
			if !ok {
				t.Fatalf("\n%s\ntraffic file %q does not parse", tc.reason, b)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\ntraffic: -want, +got:\n%s", tc.reason, diff)
			}
			if want := tc.want.String() + " cursor=" + tc.wantCursor + "\n"; b != want {
				t.Errorf("\n%s\ntraffic file: want %q, got %q", tc.reason, want, b)
			}
		})
	}
}

// TestTrafficAWKFlushesOnProbe feeds TrafficAWK through a pipe that stays
// open, as a log is: a probe's line writes the counts of the requests
// before it even within one second, so a reader that probes and then reads
// is at most one probe behind; AWKLineByLine keeps mawk from waiting for a
// block of input.
func TestTrafficAWKFlushesOnProbe(t *testing.T) {
	testenv.LookPath(t, "mawk", "Debian package mawk")
	line := func(client, url string, status int, result string) string {
		return `{"time":"2026-12-07T10:00:00Z","duration_ms":1,"client":"` + client + `","user":"a","method":"GET","url":"` + url +
			`","host":"h","status":` + strconv.Itoa(status) + `,"bytes_sent":1,"bytes_received":1,"result":"` + result + `","server":"-"}` + "\n"
	}
	out := filepath.Join(t.TempDir(), "traffic")
	cmd := exec.Command("sh", "-c", `exec awk `+AWKLineByLine+` -v out="$0" "$1" >/dev/null`, out, TrafficAWK) //nolint:gosec,noctx // The test's own awk.
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = in.Close(); _ = cmd.Wait() }()
	read := func() Traffic {
		b, _ := os.ReadFile(out) //nolint:gosec // The test's own file.
		tr, _ := ParseTraffic(string(b))
		return tr
	}
	// The first request is written at once (a new second); the second, in
	// the same second, waits for a later line.
	for _, l := range []string{line("10.0.0.1", "http://x/", 200, "TCP_MISS"), line("10.0.0.1", "http://x/", 403, "TCP_DENIED")} {
		if _, err := io.WriteString(in, l); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := io.WriteString(in, line("127.0.0.1", ProbeURL, 403, "TCP_DENIED")); err != nil {
		t.Fatal(err)
	}
	want := Traffic{Allowed: 1, DeniedDestination: 1, BytesToClients: 2, BytesFromClients: 2}
	deadline := time.Now().Add(10 * time.Second)
	for read() != want && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := read(); got != want {
		t.Errorf("after two requests and a probe in one second, with the input still open: want %v, got %v", want, got)
	}
}
