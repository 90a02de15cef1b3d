/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package kubernetes runs egress proxies in a Kubernetes cluster: per
// instance a ConfigMap (squid.conf), a Secret (htpasswd), a Deployment of
// squid, a Service in front of it and, with more than one replica, a
// PodDisruptionBudget, all named after the instance and labelled with its
// ownership.
//
// A Policy from the provider config limits the namespaces and images a
// proxy may ask for (policy.go), and the pods meet the Pod Security
// "restricted" profile (build.go).
//
// The credentials of the target cluster need, in the proxy namespaces:
// get, list, create, update and delete on configmaps, secrets, services,
// deployments.apps and poddisruptionbudgets.policy; list on pods; and, cluster
// wide, list on deployments.apps (garbage collection) and get on nodes (egress
// IPs). Delete without a namespace (garbage collection) lists every kind
// across namespaces.
//
// A backend of NewForConfig reads what Observe needs from a watch cache
// (watch.go): informers, one per kind, on the objects labelled
// egressproxy.io/managed-by=provider-egressproxy (and on every node), so a
// steady-state poll reads nothing from the API server but a liveness check
// of it (liveness.go, one GET /readyz per 10 s per target unless a write or
// a watch event answered for it, so that the last state of an unreachable
// target is not reported), and a change to an
// instance's object is reported at once (backend.Watcher). They need, cluster
// wide, list and watch on those kinds, pods and nodes; a kind whose list or
// watch is refused is read from the API server instead, as before. An
// object the backend wrote and the watch has not delivered yet is read as
// the write's response had it (after a delete: from the API server), and a
// read in the first seconds of the cache waits for its kind to be listed.
// The cache keeps of each object only what is read and compared (slim.go):
// a proxy's objects stay in it for as long as the provider runs.
//
// The package follows CAPG: service.go holds the small client interface,
// build.go pure builders of the desired objects, diff.go pure comparison of
// the fields the backend owns, and the other files the service code.
package kubernetes
