/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package proxy adapts any backend.Backend to crossplane-runtime's managed
// reconciler. The three proxy kinds share it and differ only in a small Kind
// adapter and their connector, so the reconcile behaviour (conditions,
// replacement, credentials, connection details, error classes) is written
// once.
package proxy
