package guestimage

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestFind runs the script's "path" command: it must never build, and name
// a cached qcow2 when it names anything.
func TestFind(t *testing.T) {
	p, err := Find()
	if err != nil {
		t.Fatalf("Find: %v", err)
	}
	if p == "" {
		t.Skip("the image is not built; Find reported that without an error")
	}
	if !filepath.IsAbs(p) || !strings.HasSuffix(p, ".qcow2") || !strings.Contains(p, filepath.Join("provider-egressproxy", "images")) {
		t.Errorf("Find: want a cached qcow2, got %q", p)
	}
}
