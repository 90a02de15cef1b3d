/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package kvm is the kvm backend: each egress proxy is a libvirt domain
// booting a qcow2 overlay of a cloud-init enabled base image, configured by a
// NoCloud seed ISO built in Go.
//
// Layout, after CAPG: service.go lists the libvirt calls used (a fake serves
// them in unit tests), conn.go pools one connection per provider config and
// bounds every call by its context, build.go and metadata.go build the XML,
// seed.go the seed, diff.go compares, errors.go maps libvirt error codes to
// backend error classes. The dialer subpackage reaches the daemon over a
// unix socket, SSH or TLS.
//
// Ownership lives in the domain's <metadata> (see MetadataNamespace).
// Volumes carry none: a volume belongs to the domain that claimed it in its
// metadata before creating it, never to a domain for its name alone.
package kvm
