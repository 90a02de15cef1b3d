/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package traffic

import (
	"context"
	"net"
	"strconv"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	errFmtService    = "cannot get Service %s/%s"
	errFmtSlices     = "cannot list the EndpointSlices of Service %s/%s"
	errFmtNoEndpoint = "Service %s/%s has no ready endpoint"
)

// ServiceResolver returns a Client.Resolve that maps a Service's
// name.namespace.svc:port onto a ready endpoint's address and target port,
// as cluster DNS and kube-proxy would (a test node runs neither). Other
// host:ports pass unchanged.
func ServiceResolver(c client.Reader) func(ctx context.Context, hostport string) (string, error) {
	return func(ctx context.Context, hostport string) (string, error) {
		host, port, err := net.SplitHostPort(hostport)
		if err != nil {
			return "", err
		}
		parts := strings.Split(host, ".")
		if len(parts) != 3 || parts[2] != "svc" {
			return hostport, nil
		}
		name, ns := parts[0], parts[1]
		svc := &corev1.Service{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
			return "", errors.Wrapf(err, errFmtService, ns, name)
		}
		target := port
		for _, p := range svc.Spec.Ports {
			if strconv.Itoa(int(p.Port)) == port && p.TargetPort.IntValue() != 0 {
				target = strconv.Itoa(p.TargetPort.IntValue())
			}
		}
		slices := &discoveryv1.EndpointSliceList{}
		if err := c.List(ctx, slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: name}); err != nil {
			return "", errors.Wrapf(err, errFmtSlices, ns, name)
		}
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if len(e.Addresses) > 0 && (e.Conditions.Ready == nil || *e.Conditions.Ready) {
					return net.JoinHostPort(e.Addresses[0], target), nil
				}
			}
		}
		return "", errors.Errorf(errFmtNoEndpoint, ns, name)
	}
}
