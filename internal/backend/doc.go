/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package backend is the contract every egress proxy backend implements, and
// the shared parts no backend should write again: error classes, names,
// ownership labels, instance IDs, and instrumentation of every call.
//
// docs/backends.md states each rule of the contract with its reason. This
// package holds no backend code: backends live in subpackages and depend on
// it, never on each other or on the controllers.
package backend
