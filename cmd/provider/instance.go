/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

const (
	flagInstance = "provider-instance"

	// instancePrefix and 32 hex digits make the default instance: 53
	// characters, within the 63 of a label value.
	instancePrefix = "provider-egressproxy-"
	// instanceDomain separates the instance from any other use of the key
	// of generated passwords.
	instanceDomain = "egressproxy.io/provider-instance/v1"
	instanceDigits = 32

	errFmtInstanceFlag = "--" + flagInstance + ": %s"
)

// checkInstanceFlag refuses an explicit instance that label sanitising
// would change: ownership compares it exactly, and a folded or cut value
// could be another installation's. Empty means derive it.
func checkInstanceFlag(explicit string) error {
	if explicit == "" {
		return nil
	}
	if err := backend.ValidateInstance(explicit); err != nil {
		return errors.Errorf(errFmtInstanceFlag, err.Error())
	}
	return nil
}

// providerInstance returns the explicit instance, or derives one unique to
// this installation from key, the key of generated passwords: the Secret
// holding it is already the installation's state, lasts as long as the
// installation (a copy of it moves the installation), and lives where
// Crossplane lets every provider read (its own namespace's Secrets). Two
// installations sharing a GCP project, a target cluster or a libvirt host
// then never take each other's instances for their own. The UID of
// kube-system named it before; Crossplane never grants a provider get on
// namespaces.
func providerInstance(explicit string, key []byte) (string, error) {
	if explicit != "" {
		return explicit, checkInstanceFlag(explicit)
	}
	h := hmac.New(sha256.New, key)
	h.Write([]byte(instanceDomain))
	return instancePrefix + hex.EncodeToString(h.Sum(nil))[:instanceDigits], nil
}

// instanceInfo exports the provider instance as a metric, so an operator
// can tell which installation's labels this provider owns.
func instanceInfo(instance string) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "egressproxy_provider_instance_info",
		Help: "The provider instance in this provider's ownership labels; always 1.",
	}, []string{"instance"})
	g.WithLabelValues(instance).Set(1)
	return g
}
