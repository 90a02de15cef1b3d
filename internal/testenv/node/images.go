/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package node

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// ImportImage loads an image archive (`docker save` style, as
// hack/mkimage writes) into the node's containerd, where the kubelet finds
// it: pods then run it with imagePullPolicy Never, no registry involved.
func (n *Node) ImportImage(archive string) error {
	out, err := n.nsenter("ctr", "--address", n.path("containerd.sock"), "-n", "k8s.io", "images", "import",
		"--no-unpack", archive).CombinedOutput()
	return errors.Wrapf(err, errFmtImport, archive, out)
}
