/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	errFmtNoPods    = "no running pod of %s"
	errFmtMetrics   = "cannot read the provider's metrics from pod %s: %s"
	errNoPodNetwork = "the package pods' network needs the real node"

	// packageMetricsPort is the metrics port the Deployment runtime
	// declares on a package's container.
	packageMetricsPort = 8080
)

// ProviderPods returns the pods of the active ProviderRevision, which
// Crossplane's Deployment runtime made.
func (c *Cluster) ProviderPods(ctx context.Context) ([]corev1.Pod, error) {
	return c.revisionPods(ctx, c.ProviderRevisionName)
}

// FunctionPods returns the pods of the active FunctionRevision.
func (c *Cluster) FunctionPods(ctx context.Context) ([]corev1.Pod, error) {
	return c.revisionPods(ctx, c.FunctionRevisionName)
}

func (c *Cluster) revisionPods(ctx context.Context, rev string) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := c.Client.List(ctx, pods, client.InNamespace(CrossplaneNamespace), client.MatchingLabels{LabelRevision: rev}); err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// ProviderMetrics returns the Prometheus metrics of a running provider pod,
// read at its metrics port from the node's network namespace, where pods
// are: of the leader's pod when replicas elect one (a replica that waits
// for the Lease reconciles nothing and counts nothing).
func (c *Cluster) ProviderMetrics(ctx context.Context) (string, error) {
	if c.Node == nil {
		return "", errors.New(errNoPodNetwork)
	}
	pods, err := c.ProviderPods(ctx)
	if err != nil {
		return "", err
	}
	if _, leader, err := c.ProviderLeader(ctx); err == nil && leader != nil {
		pods = append([]corev1.Pod{*leader}, pods...)
	}
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: c.Node.DialContext}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s:%d/metrics", p.Status.PodIP, packageMetricsPort), nil)
		if err != nil {
			return "", err
		}
		rsp, err := hc.Do(req)
		if err != nil {
			return "", errors.Errorf(errFmtMetrics, p.Name, err)
		}
		b, err := io.ReadAll(rsp.Body)
		_ = rsp.Body.Close()
		if err != nil || rsp.StatusCode != http.StatusOK {
			return "", errors.Errorf(errFmtMetrics, p.Name, rsp.Status)
		}
		return string(b), nil
	}
	return "", errors.Errorf(errFmtNoPods, ProviderName)
}

// ProviderLogs returns the last lines of the logs of the provider's pods,
// each of them (with replicas, the leader's and the others').
func (c *Cluster) ProviderLogs(ctx context.Context, lines int) string {
	return c.PodLogs(ctx, CrossplaneNamespace, LabelRevision+"="+c.ProviderRevisionName, lines)
}

// PodLogs returns the last lines of every container of the pods in
// namespace matching selector (kubectl logs; the apiserver reaches the
// kubelet), for failure messages: errors become lines of it.
func (c *Cluster) PodLogs(ctx context.Context, namespace, selector string, lines int) string {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		for _, ct := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			fmt.Fprintf(&b, "--- %s/%s [%s] (%s)\n", p.Namespace, p.Name, ct.Name, p.Status.Phase)
			for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
				if s.Name == ct.Name {
					fmt.Fprintf(&b, "    state %+v restarts %d\n", s.State, s.RestartCount)
				}
			}
			raw, err := cs.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: ct.Name, TailLines: ptr.To(int64(lines))}).DoRaw(ctx)
			if err != nil {
				fmt.Fprintf(&b, "    (no log: %v)\n", err)
				continue
			}
			b.Write(raw)
		}
	}
	return b.String()
}
