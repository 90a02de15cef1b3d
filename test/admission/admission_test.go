/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package admission checks, on a real kube-apiserver, that the CRDs reject
// bad input with messages that name the field, and accept every example.
package admission

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

func TestMain(m *testing.M) { os.Exit(kube.Main(m)) }

const ns = "admission"

type obj = map[string]any

func kubernetesProxy() obj {
	return obj{
		"apiVersion": "kubernetes.m.egressproxy.io/v1alpha1", "kind": "KubernetesProxy",
		"metadata": obj{"name": "p", "namespace": ns},
		"spec": obj{"forProvider": obj{
			"namespace": "egress", "allowedClientCIDRs": []any{"10.0.0.0/8"},
			"allowedDestinations": []any{"api.example.com"},
		}},
	}
}

func gcpProxy() obj {
	return obj{
		"apiVersion": "gcp.m.egressproxy.io/v1alpha1", "kind": "GCPProxy",
		"metadata": obj{"name": "p", "namespace": ns},
		"spec": obj{"forProvider": obj{
			"zone": "europe-west1-b", "allowedClientCIDRs": []any{"10.0.0.0/8"},
		}},
	}
}

func kvmProxy() obj {
	return obj{
		"apiVersion": "kvm.m.egressproxy.io/v1alpha1", "kind": "KVMProxy",
		"metadata": obj{"name": "p", "namespace": ns},
		"spec": obj{"forProvider": obj{
			"baseImageVolume": "debian-12.qcow2", "allowedClientCIDRs": []any{"10.0.0.0/8"},
		}},
	}
}

func config(group, kind string, spec obj) obj {
	md := obj{"name": "c"}
	if kind == "ProviderConfig" {
		md["namespace"] = ns
	}
	return obj{"apiVersion": group + ".m.egressproxy.io/v1alpha1", "kind": kind, "metadata": md, "spec": spec}
}

func kubernetesConfig() obj {
	return config("kubernetes", "ProviderConfig", obj{"credentials": obj{
		"source": "Secret", "secretRef": obj{"name": "kc", "key": "kubeconfig"},
	}})
}

func gcpConfig() obj {
	return config("gcp", "ClusterProviderConfig", obj{"projectID": "my-project-123", "credentials": obj{
		"source": "Secret", "secretRef": obj{"name": "key", "namespace": "crossplane-system", "key": "key.json"},
	}})
}

func kvmConfig() obj {
	return config("kvm", "ProviderConfig", obj{"uri": "qemu:///system", "credentials": obj{"source": "None"}})
}

func kvmClusterConfig() obj {
	return config("kvm", "ClusterProviderConfig", obj{"uri": "qemu:///system", "credentials": obj{"source": "None"}})
}

// set returns o with the value at the dotted path replaced; a nil value
// removes the field.
func set(o obj, path string, v any) obj {
	u := &unstructured.Unstructured{Object: o}
	fields := strings.Split(path, ".")
	if v == nil {
		unstructured.RemoveNestedField(u.Object, fields...)
		return u.Object
	}
	if err := unstructured.SetNestedField(u.Object, v, fields...); err != nil {
		panic(fmt.Sprintf("set %s: %v", path, err))
	}
	return u.Object
}

const fp = "spec.forProvider."

func TestInvalidObjectsAreRejected(t *testing.T) {
	e := kube.Shared(t)
	e.CreateNamespace(t, ns)

	cases := map[string]struct {
		obj obj
		// field must appear in the error, and so must msg.
		field, msg string
	}{
		// Shared proxy parameters, through each kind.
		"PortZero":             {set(kubernetesProxy(), fp+"port", int64(0)), fp + "port", "greater than or equal to 1"},
		"PortTooHigh":          {set(gcpProxy(), fp+"port", int64(70000)), fp + "port", "less than or equal to 65535"},
		"NoClientCIDRs":        {set(kvmProxy(), fp+"allowedClientCIDRs", []any{}), fp + "allowedClientCIDRs", "at least 1"},
		"MissingClientCIDRs":   {set(kubernetesProxy(), fp+"allowedClientCIDRs", nil), fp + "allowedClientCIDRs", "Required"},
		"ClientCIDRNotCIDR":    {set(kubernetesProxy(), fp+"allowedClientCIDRs", []any{"10.0.0.0"}), fp + "allowedClientCIDRs", "must be CIDRs"},
		"ClientCIDRGarbage":    {set(gcpProxy(), fp+"allowedClientCIDRs", []any{"10.0.0.0/8 all"}), fp + "allowedClientCIDRs", "must be CIDRs"},
		"ClientCIDRBadMask":    {set(kvmProxy(), fp+"allowedClientCIDRs", []any{"10.0.0.0/33"}), fp + "allowedClientCIDRs", "must be CIDRs"},
		"DuplicateClientCIDRs": {set(kubernetesProxy(), fp+"allowedClientCIDRs", []any{"10.0.0.0/8", "10.0.0.0/8"}), fp + "allowedClientCIDRs", "Duplicate"},
		"DestinationNewline":   {set(kubernetesProxy(), fp+"allowedDestinations", []any{"a.com\nhttp_access allow all"}), fp + "allowedDestinations", "lower-case host name"},
		"DestinationSpace":     {set(gcpProxy(), fp+"allowedDestinations", []any{"a.com all"}), fp + "allowedDestinations", "lower-case host name"},
		"DestinationQuote":     {set(kvmProxy(), fp+"allowedDestinations", []any{`a.com"`}), fp + "allowedDestinations", "lower-case host name"},
		"DestinationUpperCase": {set(kubernetesProxy(), fp+"allowedDestinations", []any{"API.example.com"}), fp + "allowedDestinations", "lower-case host name"},
		"DestinationWildcard":  {set(gcpProxy(), fp+"allowedDestinations", []any{"*.example.com"}), fp + "allowedDestinations", "lower-case host name"},
		"DestinationURL":       {set(kvmProxy(), fp+"allowedDestinations", []any{"https://example.com"}), fp + "allowedDestinations", "lower-case host name"},
		"DestinationHash":      {set(kubernetesProxy(), fp+"allowedDestinations", []any{"a.com#x"}), fp + "allowedDestinations", "lower-case host name"},
		"DestinationTooLong":   {set(kubernetesProxy(), fp+"allowedDestinations", []any{strings.Repeat("a", 254)}), fp + "allowedDestinations", "may not be more than 253"},
		"ConnectPortZero":      {set(kubernetesProxy(), fp+"allowedConnectPorts", []any{int64(0)}), fp + "allowedConnectPorts", "greater than or equal to 1"},
		"ConnectPortTooHigh":   {set(gcpProxy(), fp+"allowedConnectPorts", []any{int64(65536)}), fp + "allowedConnectPorts", "less than or equal to 65535"},
		"CredentialsNoName":    {set(kvmProxy(), fp+"credentialsSecretRef", obj{}), fp + "credentialsSecretRef.name", "Required"},
		"UnknownField":         {set(kubernetesProxy(), fp+"openProxy", true), fp + "openProxy", "unknown field"},

		// KubernetesProxy.
		"K8sNoNamespace":     {set(kubernetesProxy(), fp+"namespace", nil), fp + "namespace", "Required"},
		"K8sBadNamespace":    {set(kubernetesProxy(), fp+"namespace", "Egress_1"), fp + "namespace", "should match"},
		"K8sReplicasZero":    {set(kubernetesProxy(), fp+"replicas", int64(0)), fp + "replicas", "greater than or equal to 1"},
		"K8sReplicasTooMany": {set(kubernetesProxy(), fp+"replicas", int64(100)), fp + "replicas", "less than or equal to 20"},
		"K8sServiceType":     {set(kubernetesProxy(), fp+"serviceType", "ExternalName"), fp + "serviceType", "Unsupported value"},
		"K8sLBIPWithoutLB":   {set(kubernetesProxy(), fp+"loadBalancerIP", "203.0.113.7"), fp[:len(fp)-1], "loadBalancerIP can only be set when serviceType is LoadBalancer"},
		"K8sLBIPNotIP":       {set(set(kubernetesProxy(), fp+"serviceType", "LoadBalancer"), fp+"loadBalancerIP", "lb.example.com"), fp + "loadBalancerIP", "must be an IP address"},
		"K8sImageWithSpace":  {set(kubernetesProxy(), fp+"image", "squid:5 --x"), fp + "image", "should match"},

		// GCPProxy.
		"GCPNoZone":          {set(gcpProxy(), fp+"zone", nil), fp + "zone", "Required"},
		"GCPBadZone":         {set(gcpProxy(), fp+"zone", "europe-west1"), fp + "zone", "should match"},
		"GCPBadMachineType":  {set(gcpProxy(), fp+"machineType", "E2 small"), fp + "machineType", "should match"},
		"GCPBadImage":        {set(gcpProxy(), fp+"image", "debian-12"), fp + "image", "should match"},
		"GCPBadNetwork":      {set(gcpProxy(), fp+"network", "My_Net"), fp + "network", "should match"},
		"GCPBadTag":          {set(gcpProxy(), fp+"networkTags", []any{"Proxy Tag"}), fp + "networkTags", "should match"},
		"GCPBadLabelKey":     {set(gcpProxy(), fp+"labels", obj{"Team": "x"}), fp + "labels", "labels keys must start with a lower-case letter"},
		"GCPBadLabelValue":   {set(gcpProxy(), fp+"labels", obj{"team": "Pay ments"}), fp + "labels.team", "should match"},
		"GCPReservedLabel":   {set(gcpProxy(), fp+"labels", obj{"egressproxy-owner-uid": "x"}), fp + "labels", "reserved for ownership labels"},
		"GCPBadSA":           {set(gcpProxy(), fp+"serviceAccountEmail", "not-an-email"), fp + "serviceAccountEmail", "should match"},
		"GCPBadAddressName":  {set(gcpProxy(), fp+"address", obj{"name": "Static IP"}), fp + "address.name", "should match"},
		"GCPLongAddressName": {set(gcpProxy(), fp+"address", obj{"name": "a" + strings.Repeat("b", 63)}), fp + "address.name", "63"},

		// KVMProxy.
		"KVMNoBaseImage":    {set(kvmProxy(), fp+"baseImageVolume", nil), fp + "baseImageVolume", "Required"},
		"KVMBadBaseImage":   {set(kvmProxy(), fp+"baseImageVolume", "../etc/passwd"), fp + "baseImageVolume", "should match"},
		"KVMDiskTooBig":     {set(kvmProxy(), fp+"diskGiB", int64(4096)), fp + "diskGiB", "less than or equal to 2048"},
		"KVMMemoryTooSmall": {set(kvmProxy(), fp+"memoryMiB", int64(64)), fp + "memoryMiB", "greater than or equal to 256"},
		"KVMTooManyVCPUs":   {set(kvmProxy(), fp+"vcpus", int64(128)), fp + "vcpus", "less than or equal to 64"},
		"KVMDomainType":     {set(kvmProxy(), fp+"domainType", "xen"), fp + "domainType", "Unsupported value"},
		"KVMNetworkBoth":    {set(kvmProxy(), fp+"network", obj{"name": "default", "bridge": "br0"}), fp + "network", "exactly one of name and bridge"},
		"KVMNetworkNeither": {set(kvmProxy(), fp+"network", obj{}), fp + "network", "exactly one of name and bridge"},
		"KVMBadPool":        {set(kvmProxy(), fp+"pool", "my pool"), fp + "pool", "should match"},
		"KVMUserDataNoKey":  {set(kvmProxy(), fp+"userDataSecretRef", obj{"name": "ud"}), fp + "userDataSecretRef.key", "Required"},
		"KVMBridgeTooLong":  {set(kvmProxy(), fp+"network", obj{"bridge": "bridge-name-too-long"}), fp + "network.bridge", "15"},
		"ConfigBadPCKind":   {set(kvmProxy(), "spec.providerConfigRef", obj{"kind": "Config", "name": "x"}), "spec", "providerConfigRef.kind must be ProviderConfig or ClusterProviderConfig"},

		// Provider configs.
		"K8sConfigNoSource":        {set(kubernetesConfig(), "spec.credentials.source", nil), "spec.credentials.source", "Required"},
		"K8sConfigBadSource":       {set(kubernetesConfig(), "spec.credentials.source", "Environment"), "spec.credentials.source", "Unsupported value"},
		"K8sConfigSecretNoRef":     {set(kubernetesConfig(), "spec.credentials.secretRef", nil), "spec.credentials", "secretRef is required when credentials.source is Secret"},
		"K8sConfigInjectedWithRef": {set(kubernetesConfig(), "spec.credentials.source", "InjectedIdentity"), "spec.credentials", "choose exactly one credential source"},
		"K8sNamespacedInjected":    {set(set(kubernetesConfig(), "spec.credentials.source", "InjectedIdentity"), "spec.credentials.secretRef", nil), "", "must be Secret in a namespaced ProviderConfig"},
		"GCPNamespacedImpersonate": {set(set(set(gcpConfig(), "kind", "ProviderConfig"), "metadata.namespace", ns), "spec.credentials", obj{"source": "ImpersonateServiceAccount", "impersonateServiceAccount": obj{"name": "a@b.iam.gserviceaccount.com"}}), "", "must be Secret in a namespaced ProviderConfig"},
		"KVMNamespacedLocalSocket": {kvmConfig(), "", "must be Secret in a namespaced ProviderConfig"},
		"K8sConfigRefNoKey":        {set(kubernetesConfig(), "spec.credentials.secretRef.key", nil), "spec.credentials.secretRef.key", "Required"},
		"GCPConfigNoProject":       {set(gcpConfig(), "spec.projectID", nil), "spec.projectID", "Required"},
		"GCPConfigBadProject":      {set(gcpConfig(), "spec.projectID", "My Project"), "spec.projectID", "should match"},
		"GCPConfigSecretNoRef":     {set(gcpConfig(), "spec.credentials.secretRef", nil), "spec.credentials", "secretRef must be set when, and only when"},
		"GCPConfigImpersonateNoSA": {set(set(gcpConfig(), "spec.credentials.source", "ImpersonateServiceAccount"), "spec.credentials.secretRef", nil), "spec.credentials", "impersonateServiceAccount must be set when"},
		"GCPConfigTwoSources":      {set(gcpConfig(), "spec.credentials.impersonateServiceAccount", obj{"name": "a@b.iam.gserviceaccount.com"}), "spec.credentials", "impersonateServiceAccount must be set when, and only when"},
		"GCPConfigBadEndpoint":     {set(gcpConfig(), "spec.endpoint", "compute.example.com"), "spec.endpoint", "should match"},
		"KVMConfigBadURI":          {set(kvmClusterConfig(), "spec.uri", "xen:///system"), "spec.uri", "should match"},
		"KVMConfigSSHWithoutKey":   {set(kvmClusterConfig(), "spec.uri", "qemu+ssh://u@h/system"), "spec", "host key or certificate verification is mandatory"},
		"KVMConfigTLSWithoutCert":  {set(kvmClusterConfig(), "spec.uri", "qemu+tls://h/system"), "spec", "host key or certificate verification is mandatory"},
		"KVMConfigSecretNoRef":     {set(kvmClusterConfig(), "spec.credentials.source", "Secret"), "spec.credentials", "secretRef must be set when, and only when"},
		"KVMConfigBadSocket":       {set(kvmClusterConfig(), "spec.socketPath", "relative/sock"), "spec.socketPath", "should match"},
		"KVMPolicyZeroVCPUs":       {set(kvmClusterConfig(), "spec.policy.kvm.maxVCPUs", int64(0)), "spec.policy.kvm.maxVCPUs", "greater than or equal to 1"},
		"KVMPolicyBridgeTooLong":   {set(kvmClusterConfig(), "spec.policy.kvm.bridges", []any{"bridge-name-too-long"}), "spec.policy.kvm.bridges[0]", "15"},
		"KVMPolicyUnknownField":    {set(kvmClusterConfig(), "spec.policy.kvm.allowEverything", true), "spec.policy.kvm.allowEverything", "unknown field"},
	}
	if len(cases) < 40 {
		t.Fatalf("want at least 40 invalid objects, have %d", len(cases))
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: tc.obj}
			u.SetName(strings.ToLower(name[:1]) + "-" + fmt.Sprint(len(name)))
			// Strict is what kubectl uses, so unknown fields are errors.
			err := e.Client.Create(t.Context(), u, client.FieldValidation("Strict"))
			if err == nil {
				t.Fatalf("%s was accepted; want it rejected naming %q", name, tc.field)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.field) || !strings.Contains(msg, tc.msg) {
				t.Errorf("%s: error does not name %q with %q:\n%s", name, tc.field, tc.msg, msg)
			}
		})
	}
}
