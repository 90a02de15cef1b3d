/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"github.com/egressproxy/provider-egressproxy/internal/controller/gcpproxy"
	"github.com/egressproxy/provider-egressproxy/internal/controller/kubernetesproxy"
	"github.com/egressproxy/provider-egressproxy/internal/controller/kvmproxy"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
)

// backends are the controller sides of the backends built into this
// provider binary, one line each, in the order of registry.Backends (a test
// checks both lists name the same backends). Each declares its own flags
// and builds its factory from them.
var backends = []proxy.Registration{
	kubernetesproxy.Controller,
	gcpproxy.Controller,
	kvmproxy.Controller,
}
