/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package function

import (
	"fmt"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/crossplane/function-sdk-go/resource"
	corev1 "k8s.io/api/core/v1"
)

// readiness is the desired managed resource's readiness: ready when the
// observed one reports Ready=True, which the provider sets only once the
// proxy serves. Crossplane makes the XR, and so the claim, ready when all
// composed resources are.
func readiness(oc *resource.ObservedComposed) resource.Ready {
	if oc == nil {
		return resource.ReadyFalse
	}
	if oc.Resource.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue {
		return resource.ReadyTrue
	}
	return resource.ReadyFalse
}

// syncWarnings tells the claim's owner why the managed resource cannot be
// synced, which otherwise only shows on the managed resource itself.
func syncWarnings(oc *resource.ObservedComposed) []string {
	if oc == nil {
		return nil
	}
	c := oc.Resource.GetCondition(xpv2.TypeSynced)
	if c.Status != corev1.ConditionFalse {
		return nil
	}
	return []string{fmt.Sprintf("%s %s/%s cannot be synced: %s: %s",
		oc.Resource.GetKind(), oc.Resource.GetNamespace(), oc.Resource.GetName(), c.Reason, c.Message)}
}
