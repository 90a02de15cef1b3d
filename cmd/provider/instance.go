/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

const (
	flagInstance = "provider-instance"

	// instancePrefix and the UID of kube-system make the default
	// instance: 21 + 36 characters, within the 63 of a label value.
	instancePrefix = "provider-egressproxy-"
	// identityNamespace exists in every cluster, and its UID lives as long
	// as the cluster: it names this control plane.
	identityNamespace = metav1.NamespaceSystem

	errFmtInstanceFlag = "--" + flagInstance + ": %s"
	errDeriveInstance  = "cannot derive --" + flagInstance + " from the UID of namespace " + identityNamespace +
		": give the provider get on namespaces/" + identityNamespace + ", or set --" + flagInstance +
		" explicitly (unique per installation sharing a backend)"
)

// namespaceGetter reads a namespace from the control plane.
type namespaceGetter func(ctx context.Context, name string) (*corev1.Namespace, error)

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
// this control plane: provider-egressproxy-<UID of kube-system>. Two
// control planes sharing a GCP project, a target cluster or a libvirt host
// then never take each other's instances for their own.
func providerInstance(ctx context.Context, explicit string, get namespaceGetter) (string, error) {
	if explicit != "" {
		return explicit, checkInstanceFlag(explicit)
	}
	ns, err := get(ctx, identityNamespace)
	if err != nil {
		return "", errors.Wrap(err, errDeriveInstance)
	}
	if ns.GetUID() == "" {
		return "", errors.New(errDeriveInstance)
	}
	id := instancePrefix + string(ns.GetUID())
	if err := backend.ValidateInstance(id); err != nil {
		return "", errors.Wrap(err, errDeriveInstance)
	}
	return id, nil
}

// namespaces returns a namespaceGetter reading with c.
func namespaces(c corev1client.NamespacesGetter) namespaceGetter {
	return func(ctx context.Context, name string) (*corev1.Namespace, error) {
		return c.Namespaces().Get(ctx, name, metav1.GetOptions{})
	}
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
