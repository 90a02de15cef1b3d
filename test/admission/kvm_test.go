/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package admission

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

// kvmTeamConfig is a namespaced kvm ProviderConfig with credentials from a
// Secret, as a team would write it, reaching uri.
func kvmTeamConfig(uri string) obj {
	return set(set(kvmConfig(), "spec.credentials", obj{"source": "Secret", "secretRef": obj{"name": "kvm-ssh"}}), "spec.uri", uri)
}

// TestKVMNamespacedConfigLocalSockets: a namespaced ProviderConfig must not
// reach the provider's own libvirt, in any form the URI or socketPath can
// take; a ClusterProviderConfig may.
func TestKVMNamespacedConfigLocalSockets(t *testing.T) {
	e := kube.Shared(t)
	e.CreateNamespace(t, ns)

	const uriMsg, socketMsg = "must reach a host over qemu+ssh:// or qemu+tls://", "must not be set in a namespaced ProviderConfig"
	refused := map[string]struct {
		obj        obj
		field, msg string
	}{
		"System":          {kvmTeamConfig("qemu:///system"), "spec.uri", uriMsg},
		"UnixSocketParam": {kvmTeamConfig("qemu+unix:///system?socket=/any/path"), "spec.uri", uriMsg},
		"UnixHost":        {kvmTeamConfig("qemu+unix://host/system"), "spec.uri", uriMsg},
		"NoHost":          {kvmTeamConfig("qemu://?socket=/any/path"), "spec.uri", uriMsg},
		"TestDriver":      {kvmTeamConfig("test:///default"), "spec.uri", uriMsg},
		"TestUnix":        {kvmTeamConfig("test+unix:///default?socket=/any/path"), "spec.uri", uriMsg},
		"SSHWithoutHost":  {kvmTeamConfig("qemu+ssh:///system"), "spec.uri", uriMsg},
		"SocketPath":      {set(kvmTeamConfig("qemu+ssh://u@h/system"), "spec.socketPath", "/var/run/libvirt/libvirt-sock"), "spec.socketPath", socketMsg},
	}
	for name, tc := range refused {
		t.Run("Refused"+name, func(t *testing.T) {
			err := dryRun(t, e, tc.obj, name)
			if err == nil {
				t.Fatalf("%s was accepted; want it rejected naming %q", name, tc.field)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.field) || !strings.Contains(msg, tc.msg) {
				t.Errorf("%s: error does not name %q with %q:\n%s", name, tc.field, tc.msg, msg)
			}
		})
	}

	accepted := map[string]obj{
		"TeamSSH":             kvmTeamConfig("qemu+ssh://egressproxy@kvm1.example.com/system"),
		"TeamSSHRemoteSocket": kvmTeamConfig("qemu+ssh://u@h/system?socket=/run/libvirt/libvirt-sock"),
		"TeamTLS":             kvmTeamConfig("qemu+tls://kvm1.example.com/system"),
		"TeamImplicitTLS":     kvmTeamConfig("qemu://kvm1.example.com/system"),
		"ClusterSystem":       set(kvmClusterConfig(), "spec.socketPath", "/var/run/libvirt/libvirt-sock"),
		"ClusterUnix":         set(kvmClusterConfig(), "spec.uri", "qemu+unix:///system?socket=/run/x"),
		"ClusterTestDriver":   set(kvmClusterConfig(), "spec.uri", "test:///default"),
	}
	for name, o := range accepted {
		t.Run("Accepted"+name, func(t *testing.T) {
			if err := dryRun(t, e, o, name); err != nil {
				t.Errorf("%s was rejected: %v", name, err)
			}
		})
	}
}

// dryRun submits o under a name of its own, through every admission step
// but without storing it.
func dryRun(t *testing.T, e *kube.Env, o obj, name string) error {
	t.Helper()
	u := &unstructured.Unstructured{Object: o}
	u.SetName(fmt.Sprintf("kvm-%s", strings.ToLower(name)))
	return e.Client.Create(t.Context(), u, client.FieldValidation("Strict"), client.DryRunAll)
}
