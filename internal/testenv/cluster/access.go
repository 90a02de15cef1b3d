/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

// RegistryCAFile is the PEM file of the CA that signed the package
// registry's certificate: what a platform team trusts for a private
// registry, in Crossplane (the chart's registryCaBundleConfig) and on the
// nodes (certs.d).
func (c *Cluster) RegistryCAFile() string {
	if c.registry == nil {
		return ""
	}
	return c.registry.CAFile
}

// AuditLog is the apiserver's audit log (node.Node.AuditLog), or "" without
// a real node.
func (c *Cluster) AuditLog() string {
	if c.Node == nil {
		return ""
	}
	return c.Node.AuditLog()
}
