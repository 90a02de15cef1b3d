//go:build generate

/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package generate runs the code generators: go generate -tags generate .
package generate

// Deepcopy methods and CRDs. The CRD folder is emptied first so a removed
// kind does not leave a stale CRD behind.
//go:generate rm -rf package/provider/crds
//go:generate go tool controller-gen object:headerFile=hack/boilerplate.go.txt paths=./apis/... crd:crdVersions=v1 output:artifacts:config=package/provider/crds

// Managed resource, provider config and usage method sets.
//go:generate go tool angryjet generate-methodsets --header-file=hack/boilerplate.go.txt ./apis/...

// Composition function input: deepcopy methods of each backend's section
// (go:generate in internal/backend/<name>/<name>desc/input.go), then of the
// input, and its CRD, which goes into the function package. Never into
// package/provider/crds: the provider package may hold only the provider's
// CRDs.
//go:generate go generate ./internal/backend/...
//go:generate rm -rf package/function/input
//go:generate go tool controller-gen object:headerFile=hack/boilerplate.go.txt paths=./internal/function/input/... crd:crdVersions=v1 output:artifacts:config=package/function/input
