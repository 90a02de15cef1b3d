/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package function

import (
	"fmt"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
)

const (
	kubernetesInput = `{"apiVersion": "egressproxy.fn.egressproxy.io/v1alpha1", "kind": "Input", "backend": "kubernetes", "kubernetes": {"namespace": "egress"}}`
	observedMRJSON  = `{"apiVersion": "kubernetes.m.egressproxy.io/v1alpha1", "kind": "KubernetesProxy",
		"metadata": {"name": "web-x7k2p-0123456789ab", "namespace": "team-a"},
		"spec": {"forProvider": {"namespace": "egress", "allowedClientCIDRs": ["10.0.0.0/8"]}},
		"status": {"atProvider": {"endpoint": "10.96.0.10:3128", "egressIPs": ["203.0.113.7", "203.0.113.8"], "instanceID": "egress/web-x7k2p", "availableReplicas": 2},
		           "conditions": [%s]}}`
	readyTrue    = `{"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": "2026-01-01T00:00:00Z"}`
	readyFalse   = `{"type": "Ready", "status": "False", "reason": "Creating", "lastTransitionTime": "2026-01-01T00:00:00Z"}`
	syncedFalse  = `{"type": "Synced", "status": "False", "reason": "ReconcileError", "message": "cannot create Deployment: forbidden", "lastTransitionTime": "2026-01-01T00:00:00Z"}`
	kubernetesFP = `"namespace": "egress", "replicas": 1`
)

func TestRunFunctionObserved(t *testing.T) {
	conn := map[string][]byte{
		"endpoint": []byte("10.96.0.10:3128"), "port": []byte("3128"),
		"username": []byte("egress"), "password": []byte("s3cret"), "url": []byte("http://egress:s3cret@10.96.0.10:3128"),
	}
	kubernetesMR := func(ready fnv1.Ready) *fnv1.Resource {
		return &fnv1.Resource{
			Resource: resource.MustStructJSON(mrJSON("KubernetesProxy", "kubernetes.m.egressproxy.io", kubernetesFP, "")),
			Ready:    ready,
		}
	}

	cases := map[string]runCase{
		"ObservedReady": {
			reason: "A ready managed resource makes the desired one ready, and its status and connection details become the XR's.",
			req: &fnv1.RunFunctionRequest{
				Meta:              &fnv1.RequestMeta{Tag: "t"},
				RequiredResources: claimed(),
				Input:             resource.MustStructJSON(kubernetesInput),
				Observed: &fnv1.State{
					Composite: xr("small"),
					Resources: map[string]*fnv1.Resource{"kubernetes-proxy": {
						Resource:          resource.MustStructJSON(fmt.Sprintf(observedMRJSON, readyTrue)),
						ConnectionDetails: conn,
					}},
				},
			},
			want: composedRsp(&fnv1.State{
				Composite: desiredXR(`{"backend": "kubernetes", "endpoint": "10.96.0.10:3128", "egressIP": "203.0.113.7", "instanceID": "egress/web-x7k2p"}`, conn),
				Resources: map[string]*fnv1.Resource{"kubernetes-proxy": kubernetesMR(fnv1.Ready_READY_TRUE)},
			}),
		},
		"ObservedNotSynced": {
			reason: "A managed resource that cannot be synced stays unready, and the claim gets a warning saying why.",
			req: &fnv1.RunFunctionRequest{
				Meta:              &fnv1.RequestMeta{Tag: "t"},
				RequiredResources: claimed(),
				Input:             resource.MustStructJSON(kubernetesInput),
				Observed: &fnv1.State{
					Composite: xr("small"),
					Resources: map[string]*fnv1.Resource{"kubernetes-proxy": {
						Resource: resource.MustStructJSON(fmt.Sprintf(observedMRJSON, readyFalse+","+syncedFalse)),
					}},
				},
			},
			want: composedRsp(&fnv1.State{
				Composite: desiredXR(`{"backend": "kubernetes", "endpoint": "10.96.0.10:3128", "egressIP": "203.0.113.7", "instanceID": "egress/web-x7k2p"}`, map[string][]byte{}),
				Resources: map[string]*fnv1.Resource{"kubernetes-proxy": kubernetesMR(fnv1.Ready_READY_FALSE)},
			}, warning("KubernetesProxy team-a/web-x7k2p-0123456789ab cannot be synced: ReconcileError: cannot create Deployment: forbidden")),
		},
		"KeepsEarlierSteps": {
			reason: "What earlier pipeline steps desired, composed resources, XR fields and connection details, is kept.",
			req: &fnv1.RunFunctionRequest{
				Meta:              &fnv1.RequestMeta{Tag: "t"},
				RequiredResources: claimed(),
				Input:             resource.MustStructJSON(kubernetesInput),
				Observed:          &fnv1.State{Composite: xr("small")},
				Desired: &fnv1.State{
					Composite: &fnv1.Resource{
						Resource:          resource.MustStructJSON(`{"status": {"team": "a"}}`),
						ConnectionDetails: map[string][]byte{"ca": []byte("pem")},
					},
					Resources: map[string]*fnv1.Resource{"policy": {
						Resource: resource.MustStructJSON(`{"apiVersion": "v1", "kind": "ConfigMap"}`),
						Ready:    fnv1.Ready_READY_TRUE,
					}},
				},
			},
			want: composedRsp(&fnv1.State{
				Composite: desiredXR(`{"team": "a", "backend": "kubernetes"}`, map[string][]byte{"ca": []byte("pem")}),
				Resources: map[string]*fnv1.Resource{
					"policy": {
						Resource: resource.MustStructJSON(`{"apiVersion": "v1", "kind": "ConfigMap"}`),
						Ready:    fnv1.Ready_READY_TRUE,
					},
					"kubernetes-proxy": kubernetesMR(fnv1.Ready_READY_FALSE),
				},
			}),
		},
	}

	runCases(t, cases)
}
