/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"os"
	"time"

	"github.com/egressproxy/provider-egressproxy/internal/backend/gcp/gcpdesc"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kubernetes/kubernetesdesc"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm/kvmdesc"
)

// The backends, for tests of one backend in particular.
const (
	BackendKubernetes = Backend(kubernetesdesc.Name)
	BackendGCP        = Backend(gcpdesc.Name)
	BackendKVM        = Backend(kvmdesc.Name)
)

// A double is how the harness fakes one backend: the step that starts its
// test double and creates its ClusterProviderConfig default. This table is
// the harness's only list of backends; a backend without an entry runs
// without a test double (its claims cannot become Ready in the e2e).
type double struct {
	step func(c *Cluster) step
	// always sets the backend up even when Options.Backends leaves it out.
	always bool
	// optional turns an ErrMissing of the step into an entry of
	// Cluster.Unavailable instead of a failed Start.
	optional bool
	// cannotRun says why the double cannot run on this machine, or "".
	cannotRun func() string
	// adaptInput changes the backend's function input in the
	// Configurations' Compositions for this machine (writeOverlay), as a
	// platform team builds its own Configuration; nil keeps it as shipped.
	adaptInput func(c *Cluster, input map[string]any) error
}

var doubles = map[Backend]double{
	// The target cluster is this control plane.
	BackendKubernetes: {always: true, step: func(c *Cluster) step {
		return step{name: "kubernetes backend ProviderConfig", fn: c.setupKubernetesBackend}
	}, adaptInput: kubernetesInput},
	BackendGCP: {step: func(c *Cluster) step {
		return step{name: "GCE fake and gcp ProviderConfig", log: "gcp-fake.log", fn: c.setupGCP}
	}},
	// A first run installs libvirt and QEMU with apt.
	BackendKVM: {optional: true, cannotRun: needsRoot, step: func(c *Cluster) step {
		return step{name: "private libvirtd and kvm ProviderConfig", fn: c.setupKVM, timeout: 12 * time.Minute}
	}, adaptInput: kvmInput},
}

func needsRoot() string {
	if os.Geteuid() != 0 {
		return "a private libvirtd needs root"
	}
	return ""
}
