/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

const (
	errFmtNotOursObserve = "Deployment %s/%s exists but is not managed by this resource"
	errFmtNoDeployment   = "Deployment %s/%s does not exist"
	errFmtMissing        = "%s is missing"
	errFmtForeign        = "%s %s/%s is not managed by this resource"
)

// Messages of an instance that is not ready.
const (
	msgFmtAvailable       = "%d of %d replicas available"
	msgGeneration         = "waiting for the Deployment controller to see the latest spec"
	msgFmtRollingOut      = "rolling out: %d of %d replicas updated, %d available"
	msgFmtNoService       = "Service %s is missing"
	msgFmtNoLBAddress     = "waiting for the load balancer of Service %s to get an address"
	msgFmtCondition       = "%s: %s"
	msgFmtHalfMade        = "Deployment %s/%s is missing; %s"
	msgFmtHalfMadeForeign = "Deployment %s/%s is not managed by this resource; %s"
	reasonDeadline        = "ProgressDeadlineExceeded"
)

// live is what exists of an instance; a missing part is nil.
type live struct {
	deployment *appsv1.Deployment
	configMap  *corev1.ConfigMap
	secret     *corev1.Secret
	service    *corev1.Service
	pdb        *policyv1.PodDisruptionBudget
}

// Observe reports the instance of d. It is NotFound only when neither its
// Deployment nor any other part of ours exists (see observeHalfMade); a
// Deployment of another resource is not this instance (Create then says so).
func (b *Backend) Observe(ctx context.Context, d backend.Desired[Params]) (backend.Observation[Observation], error) {
	var o backend.Observation[Observation]
	ns := d.Params.Namespace
	if ns == "" {
		return o, backend.Permanent(errors.New(errNoNamespace))
	}
	if b.watch != nil {
		// The cache keeps its last state through an outage; report the
		// outage, not that state.
		if err := b.watch.vouch(ctx); err != nil {
			return o, err
		}
	}
	l, err := b.read(ctx, ns, d.Name)
	if err != nil {
		return o, err
	}
	dep := l.deployment
	if dep == nil {
		return b.observeHalfMade(ns, d, l)
	}
	own, ok := backend.OwnershipFromLabels(backend.KubernetesLabelKeys, dep.GetLabels())
	if !ok || !backend.OwnedBy(backend.KubernetesLabelKeys, dep.GetLabels(), d.Ownership) {
		return b.observeHalfMade(ns, d, l)
	}
	var stored []byte
	if l.secret != nil {
		stored = l.secret.Data[keyHtpasswd]
	}
	want, err := buildToCompare(&b.sums, d, stored)
	if err != nil {
		return o, err
	}
	diffs := compare(b.verifier, want, l, d)
	if err := b.policy.allow(d); err != nil {
		// Not an error: Observe must still find the instance, so that the
		// resource can be deleted. Update then refuses with the reason.
		diffs = append(diffs, err.Error())
	}
	svc := l.service
	if svc != nil && !backend.OwnedBy(backend.KubernetesLabelKeys, svc.GetLabels(), d.Ownership) {
		// Never hand clients the address of another resource's Service.
		svc = nil
	}
	endpoint := endpointOf(svc)
	ips, problem, pods, err := b.egressIPs(ctx, ns, d.Name)
	if err != nil {
		return o, err
	}
	o = backend.Observation[Observation]{
		ID:             b.id(ns, d.Name),
		State:          commonv1alpha1.StatePending,
		Endpoint:       endpoint,
		EgressIPs:      ips,
		CreatedAt:      dep.CreationTimestamp.Time,
		Ownership:      own,
		UpToDate:       len(diffs) == 0,
		Diff:           strings.Join(diffs, "; "),
		ConfigChecksum: dep.Spec.Template.Annotations[AnnotationConfigChecksum],
		Extra:          Observation{AvailableReplicas: dep.Status.AvailableReplicas},
	}
	if dep.Status.AvailableReplicas > 0 {
		o.State = commonv1alpha1.StateRunning
	}
	o.Ready, o.Message = readiness(dep, svc, endpoint)
	if !o.Ready && problem != "" {
		o.Message += "; " + problem
	}
	now := time.Now()
	o.Creating = creating(dep, now) && !o.Ready && problem == ""
	o.Traffic, o.TrafficAt = b.traffic(ctx, ns, d.Name, pods, now)
	return o, nil
}

// defaultProgressDeadline is the apiserver's default of a Deployment's
// progressDeadlineSeconds.
const defaultProgressDeadline = 600 * time.Second

// creating tells whether dep is a new Deployment still coming up with
// nothing known to be wrong: no replica yet, its rollout not stuck, made
// less than its progress deadline before now. Until that deadline the
// Deployment controller itself calls the rollout progressing; past it, it
// says ProgressDeadlineExceeded, which the message then shows. A fixed,
// shorter bound (2 minutes before) cost a status write for each proxy
// slower than it, which at 1000 new proxies was most of them, to show a
// count of 0 that told the user nothing more than Creating; what does tell
// more, a pod that cannot be scheduled, pulled or started, ends Creating at
// once (podProblem).
func creating(dep *appsv1.Deployment, now time.Time) bool {
	deadline := defaultProgressDeadline
	if s := dep.Spec.ProgressDeadlineSeconds; s != nil {
		deadline = time.Duration(*s) * time.Second
	}
	return dep.Status.AvailableReplicas == 0 && stuck(dep.Status) == "" &&
		!dep.CreationTimestamp.IsZero() && now.Sub(dep.CreationTimestamp.Time) < deadline
}

// readOnly reads a cached object without copying it: Observe only reads
// what it gets, and copying every part of every instance on every poll was
// most of a steady poll's garbage. What is read so must never be changed.
var readOnly = client.UnsafeDisableDeepCopy

// read gets every part of the instance; a missing part is nil. The parts
// are the cache's own (readOnly).
func (b *Backend) read(ctx context.Context, ns, name string) (live, error) {
	key := client.ObjectKey{Namespace: ns, Name: name}
	c := func(kind, res string) call {
		return call{verb: verbGet, kind: kind, resource: res, namespace: ns, name: name}
	}
	var l live
	var err error
	if l.deployment, err = optional(ctx, b.reads, key, &appsv1.Deployment{}, c(kindDeployment, resDeployments)); err != nil {
		return live{}, err
	}
	if l.configMap, err = optional(ctx, b.reads, key, &corev1.ConfigMap{}, c(kindConfigMap, resConfigMaps)); err != nil {
		return live{}, err
	}
	if l.secret, err = optional(ctx, b.reads, key, &corev1.Secret{}, c(kindSecret, resSecrets)); err != nil {
		return live{}, err
	}
	if l.service, err = optional(ctx, b.reads, key, &corev1.Service{}, c(kindService, resServices)); err != nil {
		return live{}, err
	}
	l.pdb, err = optional(ctx, b.reads, key, &policyv1.PodDisruptionBudget{}, c(kindPDB, resPDBs))
	return l, err
}

// observeHalfMade reports an instance without a Deployment of ours. It is
// NotFound only when no other part of ours exists either. Otherwise the
// instance is half made (Create makes the ConfigMap and the Secret before
// the Deployment, and may crash, or be refused, in between) or half
// deleted (Delete removes the Deployment last, but a part may wait on a
// finalizer). Reporting NotFound then would let the reconciler drop its
// finalizer without calling Delete, and the garbage collector lists
// Deployments only: the parts, the htpasswd among them, would leak. So it
// is reported Pending and not up to date: Update makes the Deployment, and
// Delete, on deletion, removes what is left.
func (b *Backend) observeHalfMade(ns string, d backend.Desired[Params], l live) (backend.Observation[Observation], error) {
	var o backend.Observation[Observation]
	type part struct {
		kind string
		obj  client.Object
	}
	var parts []part
	if l.configMap != nil {
		parts = append(parts, part{kindConfigMap, l.configMap})
	}
	if l.secret != nil {
		parts = append(parts, part{kindSecret, l.secret})
	}
	if l.service != nil {
		parts = append(parts, part{kindService, l.service})
	}
	if l.pdb != nil {
		parts = append(parts, part{kindPDB, l.pdb})
	}
	var left []string
	for _, p := range parts {
		if !backend.OwnedBy(backend.KubernetesLabelKeys, p.obj.GetLabels(), d.Ownership) {
			continue
		}
		if len(left) == 0 {
			o.Ownership, _ = backend.OwnershipFromLabels(backend.KubernetesLabelKeys, p.obj.GetLabels())
		}
		left = append(left, p.kind)
	}
	switch {
	case len(left) == 0 && l.deployment != nil:
		return o, backend.NotFound(errors.Errorf(errFmtNotOursObserve, ns, d.Name))
	case len(left) == 0:
		return o, backend.NotFound(errors.Errorf(errFmtNoDeployment, ns, d.Name))
	}
	msg := fmt.Sprintf(msgFmtHalfMade, ns, d.Name, joinKinds(left))
	if l.deployment != nil {
		// Update reports the clash, Delete removes our parts only.
		msg = fmt.Sprintf(msgFmtHalfMadeForeign, ns, d.Name, joinKinds(left))
	}
	o.ID = b.id(ns, d.Name)
	o.State = commonv1alpha1.StatePending
	o.Message, o.Diff = msg, msg
	if err := b.policy.allow(d); err != nil {
		o.Diff += "; " + err.Error()
	}
	return o, nil
}

// joinKinds returns "A exists", "A and B exist" or "A, B and C exist".
func joinKinds(kinds []string) string {
	if len(kinds) == 1 {
		return kinds[0] + " exists"
	}
	return strings.Join(kinds[:len(kinds)-1], ", ") + " and " + kinds[len(kinds)-1] + " exist"
}

// optional gets obj, or returns nil when it does not exist. obj is
// readOnly.
func optional[T client.Object](ctx context.Context, k reader, key client.ObjectKey, obj T, c call) (T, error) {
	var none T
	err := k.Get(ctx, key, obj, readOnly)
	if kerrors.IsNotFound(err) {
		return none, nil
	}
	if err != nil {
		return none, classify(err, c)
	}
	return obj, nil
}

// compare returns how the live instance differs from the desired one. A part
// of another owner is a difference, which Update then reports as an error.
func compare(v *squid.Verifier, want objects, l live, d backend.Desired[Params]) []string {
	var out differences
	owned := func(o client.Object, kind string) bool {
		if backend.OwnedBy(backend.KubernetesLabelKeys, o.GetLabels(), d.Ownership) {
			return true
		}
		out.add(errFmtForeign, kind, o.GetNamespace(), o.GetName())
		return false
	}
	out = append(out, diffDeployment(want.deployment, l.deployment)...)
	switch {
	case l.configMap == nil:
		out.add(errFmtMissing, kindConfigMap)
	case owned(l.configMap, kindConfigMap):
		out = append(out, diffConfigMap(want.configMap, l.configMap, want.checksum)...)
	}
	switch {
	case l.secret == nil:
		out.add(errFmtMissing, kindSecret)
	case owned(l.secret, kindSecret):
		out = append(out, diffSecret(v, want.secret, l.secret, d.Credentials.Username, d.Credentials.Password)...)
	}
	switch {
	case l.service == nil:
		out.add(errFmtMissing, kindService)
	case owned(l.service, kindService):
		out = append(out, diffService(want.service, l.service)...)
	}
	pdb := l.pdb
	if pdb != nil && !backend.OwnedBy(backend.KubernetesLabelKeys, pdb.GetLabels(), d.Ownership) {
		if want.pdb == nil {
			// Not ours and not wanted: none of our business.
			pdb = nil
		} else {
			out.add(errFmtForeign, kindPDB, pdb.GetNamespace(), pdb.GetName())
			return out
		}
	}
	return append(out, diffPDB(want.pdb, pdb)...)
}

// endpointOf returns host:port clients use, or "" while there is none.
func endpointOf(svc *corev1.Service) string {
	if svc == nil || len(svc.Spec.Ports) == 0 {
		return ""
	}
	port := strconv.Itoa(int(svc.Spec.Ports[0].Port))
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return net.JoinHostPort(svc.Name+"."+svc.Namespace+".svc", port)
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			return net.JoinHostPort(in.IP, port)
		}
		if in.Hostname != "" {
			return net.JoinHostPort(in.Hostname, port)
		}
	}
	return ""
}

// readiness tells whether the proxy serves: a replica is available and
// clients have an endpoint. While no replica is available the message is
// the count, and why a rollout is stuck: a new proxy went through three
// messages before (the controller has not seen the spec, rolling out, the
// count), each a status write that told a user nothing the count does not.
// A rollout (a configuration or password change) keeps the proxy ready:
// the old pods serve until new ones are ready, and the change is in force
// then (docs/backends.md). Only a rollout stuck past its progress deadline
// is not ready, or a broken change would never show.
func readiness(dep *appsv1.Deployment, svc *corev1.Service, endpoint string) (bool, string) {
	want := ptr.Deref(dep.Spec.Replicas, 1)
	st := dep.Status
	rolling := st.ObservedGeneration < dep.Generation || st.UpdatedReplicas < want || st.Replicas > st.UpdatedReplicas
	switch {
	case st.AvailableReplicas < 1:
		return false, fmt.Sprintf(msgFmtAvailable, st.AvailableReplicas, want) + stuck(st)
	case rolling && stuck(st) != "":
		return false, fmt.Sprintf(msgFmtRollingOut, st.UpdatedReplicas, want, st.AvailableReplicas) + stuck(st)
	case svc == nil:
		return false, fmt.Sprintf(msgFmtNoService, dep.Name)
	case endpoint == "":
		return false, fmt.Sprintf(msgFmtNoLBAddress, svc.Name)
	case st.ObservedGeneration < dep.Generation:
		return true, msgGeneration
	case rolling:
		return true, fmt.Sprintf(msgFmtRollingOut, st.UpdatedReplicas, want, st.AvailableReplicas)
	}
	return true, fmt.Sprintf(msgFmtAvailable, st.AvailableReplicas, want)
}

// stuck says why a rollout is stuck: no quota for pods, a deadline.
func stuck(st appsv1.DeploymentStatus) string {
	var msg string
	for _, c := range st.Conditions {
		if stuckCondition(c) {
			msg += "; " + fmt.Sprintf(msgFmtCondition, c.Type, c.Message)
		}
	}
	return msg
}

// stuckCondition tells whether c says a rollout is stuck.
func stuckCondition(c appsv1.DeploymentCondition) bool {
	return (c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue) || c.Reason == reasonDeadline
}
