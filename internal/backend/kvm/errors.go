/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	golibvirt "github.com/digitalocean/go-libvirt"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// classOfCode is the error table of the backend: what a libvirt error code
// means for the reconciler. docs/backends.md has the same table; codes were
// observed on libvirt 9.0 (QEMU and test drivers) unless noted.
func classOfCode(code golibvirt.ErrorNumber) backend.Class {
	switch code { //nolint:exhaustive // Every other code is Transient.
	case golibvirt.ErrNoDomain, // 42
		golibvirt.ErrNoNetwork,     // 43
		golibvirt.ErrNoStoragePool, // 49
		golibvirt.ErrNoStorageVol:  // 50
		return backend.ClassNotFound
	case golibvirt.ErrXMLError, // 27, a document libvirt cannot parse
		golibvirt.ErrXMLDetail,         // 35, a value it refuses
		golibvirt.ErrConfigUnsupported, // 67, e.g. an IDE CD-ROM on q35
		golibvirt.ErrNoSupport,         // 3, the driver lacks the call
		golibvirt.ErrInvalidArg,        // 8, a flag the driver refuses
		golibvirt.ErrAuthFailed,        // 45
		golibvirt.ErrAuthCancelled,     // 79
		golibvirt.ErrAuthUnavailable,   // 94
		golibvirt.ErrAccessDenied,      // 88, polkit or ACL
		golibvirt.ErrOperationDenied,   // 29
		golibvirt.ErrStorageVolExist,   // 90, if it escapes the adoption checks
		golibvirt.ErrDomExist:          // 28
		return backend.ClassPermanent
	case golibvirt.ErrOperationInvalid, // 55, wrong state: starting, stopping
		golibvirt.ErrAgentUnresponsive, // 86
		golibvirt.ErrInternalError,     // 1
		golibvirt.ErrSystemError,       // 38
		golibvirt.ErrNoConnect,         // 5
		golibvirt.ErrResourceBusy,      // 87
		golibvirt.ErrOperationTimeout:  // 68
		return backend.ClassTransient
	}
	return backend.ClassTransient
}

// classify wraps err with its class. Already classified errors keep theirs.
// Quota wins over the code: libvirt reports a full pool as a system error
// (38) or an internal one (1) whose message carries strerror(ENOSPC).
func classify(err error) error {
	if err == nil {
		return nil
	}
	var be *backend.Error
	if errors.As(err, &be) {
		return err
	}
	if strings.Contains(err.Error(), "No space left") || errors.Is(err, syscall.ENOSPC) {
		return backend.Quota(err)
	}
	var le golibvirt.Error
	if errors.As(err, &le) {
		if isExists(err) {
			return backend.Permanent(err)
		}
		return withClass(classOfCode(golibvirt.ErrorNumber(le.Code)), err)
	}
	if permanentTransportError(err) {
		return backend.Permanent(err)
	}
	// Connection losses (a bare syscall.Errno, *net.OpError, EOF) and a done
	// context: try again, on a fresh connection.
	return backend.Transient(err)
}

func withClass(c backend.Class, err error) error {
	switch c { //nolint:exhaustive // The table only yields these.
	case backend.ClassNotFound:
		return backend.NotFound(err)
	case backend.ClassPermanent:
		return backend.Permanent(err)
	}
	return backend.Transient(err)
}

// permanentTransportError reports errors that need a config or credentials
// change: an unknown or changed host key, an untrusted certificate, a key
// the server refuses.
func permanentTransportError(err error) bool {
	var ke *knownhosts.KeyError
	var re *knownhosts.RevokedError
	var ce *tls.CertificateVerificationError
	var ue x509.UnknownAuthorityError
	var he x509.HostnameError
	return errors.As(err, &ke) || errors.As(err, &re) || errors.As(err, &ce) || errors.As(err, &ue) || errors.As(err, &he) ||
		strings.Contains(err.Error(), "unable to authenticate")
}

// hasCode reports whether err is a libvirt error with code.
func hasCode(err error, code golibvirt.ErrorNumber) bool {
	var e golibvirt.Error
	return errors.As(err, &e) && e.Code == uint32(code)
}

// isExists reports libvirt's "already exists": 90 for a volume, 9 with that
// message for a domain defined twice (28, ErrDomExist, was never seen).
func isExists(err error) bool {
	if hasCode(err, golibvirt.ErrStorageVolExist) || hasCode(err, golibvirt.ErrDomExist) {
		return true
	}
	return hasCode(err, golibvirt.ErrOperationFailed) && strings.Contains(err.Error(), "already exists")
}

// isNotFound reports a missing domain, network, pool or volume.
func isNotFound(err error) bool {
	var e golibvirt.Error
	return errors.As(err, &e) && classOfCode(golibvirt.ErrorNumber(e.Code)) == backend.ClassNotFound
}

// connectionLost reports errors after which the connection is unusable:
// go-libvirt returns a bare errno (EINVAL, EPIPE) or a net error once the
// daemon is gone, and io.EOF when it hung up mid-call.
func connectionLost(err error) bool {
	if err == nil {
		return false
	}
	var le golibvirt.Error
	if errors.As(err, &le) {
		return false
	}
	var errno syscall.Errno
	var op *net.OpError
	return errors.As(err, &errno) || errors.As(err, &op) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}
