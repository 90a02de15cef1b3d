/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// AnyNamespace in Policy.Namespaces allows every namespace but the reserved
// ones.
const AnyNamespace = "*"

const (
	fieldNamespace         = "spec.forProvider.namespace"
	fieldImage             = "spec.forProvider.image"
	fieldAllowedNamespaces = "spec.allowedNamespaces"
	fieldAllowedImages     = "spec.allowedImages"

	errFmtReserved     = "%s %q is refused: kube-system, kube-public and kube-node-lease are reserved for the cluster, whatever %s allows"
	errFmtNotAllowed   = "%s %q is not allowed by %s: its %s %s"
	msgFmtOwnNamespace = "is empty, which allows only %q, the managed resource's own namespace"
	msgFmtDefaultImage = "is empty, which allows only the default image %q"
	msgAllow           = "allow "
)

// reservedNamespaces hold the cluster's own workloads and data. A proxy there
// would run next to them with whatever the namespace grants, so no provider
// config can allow them.
var reservedNamespaces = []string{"kube-system", "kube-public", "kube-node-lease"}

// Policy is what a provider config lets the proxies that use it ask of the
// target cluster. The zero Policy allows only the managed resource's own
// namespace name and the default image.
type Policy struct {
	// Config names the provider config in messages, as "ClusterProviderConfig
	// default" or "ProviderConfig team-a/target".
	Config string
	// Namespaces the proxies may run in: names, or AnyNamespace. Empty allows
	// only the namespace named like the managed resource's.
	Namespaces []string
	// Images the proxies may run: exact references, or prefixes ending in
	// "/", ":" or "@" (see imageAllowed). Empty allows only DefaultImage.
	Images []string
}

// WithPolicy makes Create and Update refuse a proxy that p does not allow,
// and Observe report such a proxy as not up to date. Without it the backend
// refuses only the reserved namespaces; the factory always sets it.
func WithPolicy(p Policy) Option {
	return func(b *Backend) { b.policy = &p }
}

// allow returns a Permanent error naming the field of d that the policy p
// refuses, and the config, or nil. A nil p refuses only the reserved
// namespaces. It makes no call, so a refused proxy never reaches the target
// cluster.
func (p *Policy) allow(d backend.Desired[Params]) error {
	ns, own := d.Params.Namespace, d.Ownership.Owner.Namespace
	config := "any provider config"
	if p != nil {
		config = p.Config
	}
	if slices.Contains(reservedNamespaces, ns) {
		return backend.Permanent(errors.Errorf(errFmtReserved, fieldNamespace, ns, config))
	}
	if p == nil {
		return nil
	}
	if !p.namespaceAllowed(ns, own) {
		why := describe(p.Namespaces, fmt.Sprintf(msgFmtOwnNamespace, own))
		return backend.Permanent(errors.Errorf(errFmtNotAllowed, fieldNamespace, ns, p.Config, fieldAllowedNamespaces, why))
	}
	if im := image(d.Params); !p.imageAllowed(im) {
		why := describe(p.Images, fmt.Sprintf(msgFmtDefaultImage, DefaultImage))
		return backend.Permanent(errors.Errorf(errFmtNotAllowed, fieldImage, im, p.Config, fieldAllowedImages, why))
	}
	return nil
}

func (p *Policy) namespaceAllowed(ns, own string) bool {
	if len(p.Namespaces) == 0 {
		return ns == own
	}
	return slices.Contains(p.Namespaces, AnyNamespace) || slices.Contains(p.Namespaces, ns)
}

// imageAllowed matches image against the allowlist as written: a reference
// is not normalised (squid:6 is not docker.io/library/squid:6), so a list
// means exactly what it says. A prefix ending in ":" or "@" allows the tags or
// digests of one repository only: what follows may hold no "/", so
// "registry.example.com:" cannot stand for every repository on a port.
func (p *Policy) imageAllowed(image string) bool {
	if len(p.Images) == 0 {
		return image == DefaultImage
	}
	for _, a := range p.Images {
		rest, ok := strings.CutPrefix(image, a)
		switch {
		case !ok:
		case rest == "", strings.HasSuffix(a, "/"):
			return true
		case (strings.HasSuffix(a, ":") || strings.HasSuffix(a, "@")) && !strings.Contains(rest, "/"):
			return true
		}
	}
	return false
}

// describe says what an allowlist allows, for a message: its entries, or
// ifEmpty.
func describe(l []string, ifEmpty string) string {
	if len(l) == 0 {
		return ifEmpty
	}
	q := make([]string, len(l))
	for i, s := range l {
		q[i] = strconv.Quote(s)
	}
	return msgAllow + strings.Join(q, ", ")
}
