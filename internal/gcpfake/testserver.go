package gcpfake

import "testing"

// NewTestServer starts a Server for a test and closes it when the test ends.
func NewTestServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := New(opts...)
	if err := s.Start(); err != nil {
		t.Fatalf("cannot start the GCE fake: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}
