/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

func TestClassify(t *testing.T) {
	cases := map[string]struct {
		reason string
		err    error
		want   backend.Class
	}{
		"Nil":             {"nil stays nil.", nil, backend.ClassNone},
		"NoDomain":        {"42 is NotFound.", lvErr(golibvirt.ErrNoDomain, "Domain not found"), backend.ClassNotFound},
		"NoNetwork":       {"43 is NotFound.", lvErr(golibvirt.ErrNoNetwork, "Network not found"), backend.ClassNotFound},
		"NoPool":          {"49 is NotFound.", lvErr(golibvirt.ErrNoStoragePool, "pool not found"), backend.ClassNotFound},
		"NoVolume":        {"50 is NotFound.", lvErr(golibvirt.ErrNoStorageVol, "vol not found"), backend.ClassNotFound},
		"VolumeExists":    {"90 that escaped the adoption checks is Permanent.", lvErr(golibvirt.ErrStorageVolExist, "exists"), backend.ClassPermanent},
		"DomainExists":    {"9 'already exists' is Permanent.", lvErr(golibvirt.ErrOperationFailed, "domain 'x' already exists with uuid"), backend.ClassPermanent},
		"OperationFailed": {"Other 9s are Transient.", lvErr(golibvirt.ErrOperationFailed, "operation failed"), backend.ClassTransient},
		"WrongState":      {"55 is Transient.", lvErr(golibvirt.ErrOperationInvalid, "domain is not running"), backend.ClassTransient},
		"XMLDetail":       {"35 is Permanent.", lvErr(golibvirt.ErrXMLDetail, "bad value"), backend.ClassPermanent},
		"Unsupported":     {"67 is Permanent.", lvErr(golibvirt.ErrConfigUnsupported, "IDE on q35"), backend.ClassPermanent},
		"Agent":           {"86 is Transient.", lvErr(golibvirt.ErrAgentUnresponsive, "agent"), backend.ClassTransient},
		"Internal":        {"1 is Transient.", lvErr(golibvirt.ErrInternalError, "internal"), backend.ClassTransient},
		"System":          {"38 is Transient.", lvErr(golibvirt.ErrSystemError, "cannot open"), backend.ClassTransient},
		"Auth":            {"45 is Permanent.", lvErr(golibvirt.ErrAuthFailed, "auth"), backend.ClassPermanent},
		"NoConnect":       {"5 is Transient.", lvErr(golibvirt.ErrNoConnect, "no connect"), backend.ClassTransient},
		"NoSpace":         {"ENOSPC in any message is Quota.", lvErr(golibvirt.ErrSystemError, "write failed: No space left on device"), backend.ClassQuota},
		"Errno":           {"A bare errno after the daemon died is Transient.", syscall.EINVAL, backend.ClassTransient},
		"OpError":         {"A failed dial is Transient.", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, backend.ClassTransient},
		"EOF":             {"A hang-up is Transient.", io.EOF, backend.ClassTransient},
		"Deadline":        {"A call that outlived its reconcile is Transient.", context.DeadlineExceeded, backend.ClassTransient},
		"HostKey":         {"An unknown SSH host key is Permanent.", &knownhosts.KeyError{}, backend.ClassPermanent},
		"Classified":      {"A classified error keeps its class.", backend.NotFound(errors.New("x")), backend.ClassNotFound},
		"Wrapped":         {"Wrapping keeps the code.", errors.Wrap(lvErr(golibvirt.ErrNoStorageVol, "x"), "context"), backend.ClassNotFound},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, backend.ClassOf(classify(tc.err))); diff != "" {
				t.Errorf("%s\nclassify(%v): -want, +got:\n%s", tc.reason, tc.err, diff)
			}
		})
	}
}

// TestErrorCodes pins the libvirt codes the table in docs/backends.md
// names, so a renumbered constant cannot silently change a class.
func TestErrorCodes(t *testing.T) {
	got := map[string]golibvirt.ErrorNumber{
		"NoDomain": golibvirt.ErrNoDomain, "NoNetwork": golibvirt.ErrNoNetwork, "NoStoragePool": golibvirt.ErrNoStoragePool,
		"NoStorageVol": golibvirt.ErrNoStorageVol, "StorageVolExist": golibvirt.ErrStorageVolExist, "OperationFailed": golibvirt.ErrOperationFailed,
		"OperationInvalid": golibvirt.ErrOperationInvalid, "XMLDetail": golibvirt.ErrXMLDetail, "ConfigUnsupported": golibvirt.ErrConfigUnsupported,
		"AgentUnresponsive": golibvirt.ErrAgentUnresponsive, "InternalError": golibvirt.ErrInternalError, "SystemError": golibvirt.ErrSystemError,
		"AuthFailed": golibvirt.ErrAuthFailed, "NoConnect": golibvirt.ErrNoConnect,
	}
	want := map[string]golibvirt.ErrorNumber{
		"NoDomain": 42, "NoNetwork": 43, "NoStoragePool": 49, "NoStorageVol": 50, "StorageVolExist": 90, "OperationFailed": 9,
		"OperationInvalid": 55, "XMLDetail": 35, "ConfigUnsupported": 67, "AgentUnresponsive": 86, "InternalError": 1,
		"SystemError": 38, "AuthFailed": 45, "NoConnect": 5,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("libvirt error codes: -want, +got:\n%s", diff)
	}
}

func TestConnectionLost(t *testing.T) {
	cases := map[string]struct {
		err  error
		want bool
	}{
		"Nil":      {nil, false},
		"Libvirt":  {lvErr(golibvirt.ErrNoDomain, "x"), false},
		"Errno":    {syscall.EINVAL, true},
		"Wrapped":  {errors.Wrap(syscall.EPIPE, "x"), true},
		"OpError":  {&net.OpError{Op: "read", Err: syscall.ECONNRESET}, true},
		"EOF":      {io.EOF, true},
		"Canceled": {context.Canceled, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := connectionLost(tc.err); got != tc.want {
				t.Errorf("connectionLost(%v): want %t, got %t", tc.err, tc.want, got)
			}
		})
	}
}
