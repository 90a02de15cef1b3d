/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package node

import (
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

const errFmtKill = "cannot kill the container %s: %s"

// KillContainer SIGKILLs a container of a pod through the node's
// containerd, as a crash or the OOM killer would: no SIGTERM, no grace.
// id is a pod status's containerID (containerd://<id>) or the bare ID.
// The kubelet sees the container die and restarts it.
func (n *Node) KillContainer(id string) error {
	id = strings.TrimPrefix(id, "containerd://")
	out, err := n.nsenter("ctr", "--address", n.path("containerd.sock"), "-n", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", id).CombinedOutput()
	return errors.Wrapf(err, errFmtKill, id, strings.TrimSpace(string(out)))
}
