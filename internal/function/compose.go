/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package function

import (
	"fmt"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	gcpv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	kubernetesv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	kvmv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kvm/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/function/input/v1alpha1"
)

const (
	errFmtUnknownBackend = "unknown backend %q in the function input: it must be kubernetes, gcp or kvm"
	errNoGCPZone         = "the function input has no gcp.zone: a Composition for the gcp backend must choose the zone of the proxy VMs"
	errNoKVMBaseImage    = "the function input has no kvm.baseImageVolume: a Composition for the kvm backend must choose the image the proxy VMs boot"
	errKVMNetwork        = "the function input's kvm.network must set exactly one of name and bridge"
	errToUnstructured    = "cannot convert the managed resource parameters"
)

// A backend composes the managed resource of one backend.
type backend struct {
	// resource names the managed resource in the Composition. Each backend
	// has its own name, so a claim moved to another backend's Composition
	// gets its old managed resource deleted and a new one created, rather
	// than one kind applied over another.
	resource resource.Name
	gvk      schema.GroupVersionKind

	// forProvider returns the managed resource's spec.forProvider.
	forProvider func(in *v1alpha1.Input, p proxy, size string) (any, []string, error)
}

// backendFor returns the backend the input asks for.
func backendFor(b v1alpha1.Backend) (backend, error) {
	switch b {
	case v1alpha1.BackendKubernetes:
		return backend{resource: "kubernetes-proxy", gvk: kubernetesv1alpha1.KubernetesProxyGroupVersionKind, forProvider: kubernetesForProvider}, nil
	case v1alpha1.BackendGCP:
		return backend{resource: "gcp-proxy", gvk: gcpv1alpha1.GCPProxyGroupVersionKind, forProvider: gcpForProvider}, nil
	case v1alpha1.BackendKVM:
		return backend{resource: "kvm-proxy", gvk: kvmv1alpha1.KVMProxyGroupVersionKind, forProvider: kvmForProvider}, nil
	default:
		return backend{}, errors.Errorf(errFmtUnknownBackend, b)
	}
}

// compose returns the desired managed resource of the proxy, and warnings
// about choices the function made for the claim.
func (b backend) compose(in *v1alpha1.Input, p proxy) (*composed.Unstructured, []string, error) {
	size, warnings := sizeOf(p.spec.Size)
	params, w, err := b.forProvider(in, p, size)
	if err != nil {
		return nil, nil, err
	}
	fp, err := runtime.DefaultUnstructuredConverter.ToUnstructured(params)
	if err != nil {
		return nil, nil, errors.Wrap(err, errToUnstructured)
	}
	spec := map[string]any{
		"forProvider": fp,
		// The claim's connection secret is filled from this one, which
		// Crossplane reads as the composed resource's connection details.
		"writeConnectionSecretToRef": map[string]any{"name": connectionSecretName(p)},
	}
	if r := in.ProviderConfigRef; r != nil {
		spec["providerConfigRef"] = map[string]any{"kind": r.Kind, "name": r.Name}
	}
	mr := composed.New()
	mr.SetGroupVersionKind(b.gvk)
	// Crossplane names the managed resource; a LegacyCluster XR does not
	// choose its namespace, so the function does.
	mr.SetNamespace(p.namespace)
	mr.Object["spec"] = spec
	return mr, append(warnings, w...), nil
}

// connectionSecretName names the managed resource's connection Secret in the
// claim's namespace. The XR's name is unique in the cluster, and unlike the
// managed resource's it is known before the first composition.
func connectionSecretName(p proxy) string {
	return p.xrName + "-proxy-connection"
}

func kubernetesForProvider(in *v1alpha1.Input, p proxy, size string) (any, []string, error) {
	d := in.Kubernetes
	if d == nil {
		d = &v1alpha1.KubernetesDefaults{}
	}
	fp := &kubernetesv1alpha1.KubernetesProxyParameters{
		ProxyParameters: p.spec.parameters(),
		Namespace:       d.Namespace,
		Image:           d.Image,
		Replicas:        ptr.To(replicasFor(size, d.Replicas)),
	}
	if d.ServiceType != nil {
		fp.ServiceType = ptr.To(corev1.ServiceType(*d.ServiceType))
	}
	var w []string
	if fp.Namespace == "" {
		fp.Namespace = p.namespace
		w = append(w, fmt.Sprintf("the function input has no kubernetes.namespace: the proxy runs in namespace %q of the target cluster, named like the claim's", p.namespace))
	}
	return fp, w, nil
}

func gcpForProvider(in *v1alpha1.Input, p proxy, size string) (any, []string, error) {
	d := in.GCP
	if d == nil || d.Zone == "" {
		return nil, nil, errors.New(errNoGCPZone)
	}
	return &gcpv1alpha1.GCPProxyParameters{
		ProxyParameters: p.spec.parameters(),
		Zone:            d.Zone,
		MachineType:     machineTypeFor(size, d.MachineTypes),
		Image:           ptr.Deref(d.Image, ""),
		Network:         ptr.Deref(d.Network, ""),
		Subnetwork:      d.Subnetwork,
		NetworkTags:     d.NetworkTags,
	}, nil, nil
}

func kvmForProvider(in *v1alpha1.Input, p proxy, size string) (any, []string, error) {
	d := in.KVM
	if d == nil || d.BaseImageVolume == "" {
		return nil, nil, errors.New(errNoKVMBaseImage)
	}
	sz := kvmSizeFor(size, d.Sizes)
	fp := &kvmv1alpha1.KVMProxyParameters{
		ProxyParameters: p.spec.parameters(),
		Pool:            ptr.Deref(d.Pool, ""),
		BaseImageVolume: d.BaseImageVolume,
		DiskGiB:         ptr.Deref(d.DiskGiB, 0),
		VCPUs:           sz.VCPUs,
		MemoryMiB:       sz.MemoryMiB,
		DomainType:      ptr.Deref(d.DomainType, ""),
	}
	if n := d.Network; n != nil {
		if (n.Name == nil) == (n.Bridge == nil) {
			return nil, nil, errors.New(errKVMNetwork)
		}
		fp.Network = &kvmv1alpha1.KVMNetwork{Name: n.Name, Bridge: n.Bridge}
	}
	return fp, nil, nil
}
