/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

// The image is a static binary on an empty base, without a CA bundle: the
// binary carries Mozilla's roots, which Go uses when the system has none
// (a mounted SSL_CERT_FILE or SSL_CERT_DIR still wins). Keep the module up
// to date (govulncheck reports stale roots).
import _ "golang.org/x/crypto/x509roots/fallback"
