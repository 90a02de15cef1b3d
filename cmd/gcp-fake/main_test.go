package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRunPrintsURLAndStops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--address", "127.0.0.1:0", "--project", "p"}, pw) }()

	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the URL: %v", err)
	}
	url := strings.TrimSpace(line)
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("printed %q, want a loopback URL", url)
	}
	resp, err := http.Get(url + "/_fake/healthz")
	if err != nil {
		t.Fatalf("healthz: %v", err)
	}
	_ = resp.Body.Close()
	resp, err = http.Get(url + "/compute/v1/projects/other/global/firewalls")
	if err != nil {
		t.Fatalf("list firewalls: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a project not given with --project: %d, want 404", resp.StatusCode)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	if err := run(context.Background(), []string{"--no-such-flag"}, io.Discard); err == nil {
		t.Error("run with an unknown flag: want an error")
	}
}

func TestRunRejectsSimulatedAndRealGuests(t *testing.T) {
	args := []string{"--simulate-guests", "--guest-libvirt-uri", "qemu+unix:///system?socket=/nonexistent"}
	if err := run(context.Background(), args, io.Discard); err == nil || !strings.Contains(err.Error(), errBoth) {
		t.Errorf("run %v: want %q, got %v", args, errBoth, err)
	}
}
