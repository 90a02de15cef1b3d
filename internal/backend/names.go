/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package backend

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/types"
)

// NamePrefix starts every instance name (see Name); a backend tells its own
// instances' parts by it.
const NamePrefix = "egp"

// Owner identifies the managed resource an instance belongs to.
type Owner struct {
	// UID of the managed resource.
	UID types.UID
	// Namespace of the managed resource.
	Namespace string
	// Name of the managed resource.
	Name string
}

// Name returns the deterministic backend name of the instance of o, at most
// maxLen long: egp-<namespace>-<name>-<hash of the UID>. The readable part
// is for people, the hash keeps names unique when namespace and name are
// truncated, and a re-created resource (new UID) never adopts the instance
// of its predecessor. The result is a lower-case RFC 1035 label, valid on
// every backend.
func Name(o Owner, maxLen int) string {
	sum := sha256.Sum256([]byte(o.UID))
	hash := hex.EncodeToString(sum[:])[:8]
	readable := sanitize(o.Namespace + "-" + o.Name)
	room := maxLen - len(NamePrefix) - len(hash) - 2
	if room < 0 {
		room = 0
	}
	if len(readable) > room {
		readable = strings.TrimRight(readable[:room], "-")
	}
	if readable == "" {
		return NamePrefix + "-" + hash
	}
	return NamePrefix + "-" + readable + "-" + hash
}

// sanitize keeps lower-case letters and digits and folds every other run of
// bytes into one dash.
func sanitize(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
			continue
		}
		if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimRight(b.String(), "-")
}

const (
	errFmtMalformedID = "malformed instance ID %q: want %s://%s"
	idSeparator       = "://"
)

// FormatID returns a self-contained instance ID: scheme://part/part/... An ID
// carries everything needed to find the instance again (project and zone,
// host, namespace), so Observe and Delete need no other state, and the
// garbage collector can delete what List found.
func FormatID(scheme string, parts ...string) string {
	return scheme + idSeparator + strings.Join(parts, "/")
}

// ParseID splits an ID made by FormatID into its n parts. A malformed ID is
// a Permanent error: retrying cannot repair it.
func ParseID(id, scheme string, names ...string) ([]string, error) {
	want := strings.Join(names, "/")
	rest, ok := strings.CutPrefix(id, scheme+idSeparator)
	if !ok {
		return nil, Permanent(errors.Errorf(errFmtMalformedID, id, scheme, want))
	}
	parts := strings.Split(rest, "/")
	if len(parts) != len(names) {
		return nil, Permanent(errors.Errorf(errFmtMalformedID, id, scheme, want))
	}
	for _, p := range parts {
		if p == "" {
			return nil, Permanent(errors.Errorf(errFmtMalformedID, id, scheme, want))
		}
	}
	return parts, nil
}
