/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package node

import (
	"os"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

const errAuditPolicy = "cannot write the apiserver's audit policy"

// auditPolicy records who made each request, with which user agent, on
// which object (level Metadata: no bodies), except the requests of the
// cluster's own components, which no test asks about and which are most
// of the traffic. A watch is recorded when it starts, not only when it
// ends minutes later.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users:
  - system:kube-controller-manager
  - system:kube-scheduler
  - system:kube-proxy
  - system:apiserver
- level: None
  userGroups: [system:nodes]
- level: Metadata
`

// AuditLog is the apiserver's audit log: JSON lines, one per stage of a
// request (auditPolicy), for tests that check who made the requests of a
// program, such as the provider's as its ServiceAccount.
func (n *Node) AuditLog() string { return n.path("audit.log") }

// RegistryConfigDir is containerd's config_path of registry hosts on this
// node: what /etc/containerd/certs.d is on most distributions.
func (n *Node) RegistryConfigDir() string { return n.path("certs.d") }

// auditFlags writes the audit policy and returns kube-apiserver's flags
// for it and the log.
func (n *Node) auditFlags() ([]string, error) {
	policy := n.path("audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, errors.Wrap(err, errAuditPolicy)
	}
	return []string{"--audit-policy-file=" + policy, "--audit-log-path=" + n.AuditLog(), "--audit-log-format=json"}, nil
}

// withFlags returns args followed by flags.
func withFlags(flags []string, args ...string) []string { return append(args, flags...) }
