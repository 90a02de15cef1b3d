/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	clientfeatures "k8s.io/client-go/features"
)

// Since client-go 1.35 an informer fills itself with a streaming list
// (WatchListClient): a watch that sends the current objects first. The API
// server builds the watch cache of a custom resource on the first request
// for it after it starts, and while it builds it, it answers a watch with
// 429 and Retry-After: 1 s, where it serves a list from etcd. The manager
// starts its controllers only once every informer has synced, so on every
// fresh API server (a new cluster, one just restarted, make dev, every test)
// the provider began reconciling ~2 s later (~1.1 s per informer started
// together; docs/bench.md at 22cd24f, "streaming lists"), for nothing at its sizes.
// Off, an informer lists at resourceVersion 0, as every informer did before
// 1.35: the watch that follows brings what the list missed, and every
// write checks the resourceVersion it read.

// envWatchList is how client-go's own gates read WatchListClient from the
// environment; when it is set, it decides.
const envWatchList = "KUBE_FEATURE_" + string(clientfeatures.WatchListClient)

// informerGates returns g with WatchListClient off, unless the environment
// sets it.
func informerGates(g clientfeatures.Gates, lookupEnv func(string) (string, bool)) clientfeatures.Gates {
	if _, set := lookupEnv(envWatchList); set {
		return g
	}
	return noWatchList{Gates: g}
}

// noWatchList answers WatchListClient with false and every other gate as
// the gates it wraps.
type noWatchList struct{ clientfeatures.Gates }

func (g noWatchList) Enabled(f clientfeatures.Feature) bool {
	if f == clientfeatures.WatchListClient {
		return false
	}
	return g.Gates.Enabled(f)
}
