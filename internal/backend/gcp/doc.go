/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package gcp runs egress proxies on Compute Engine: per proxy one VM, a
// regional static external address the VM sends from (so the egress IP
// survives replacement of the VM), and a firewall rule that admits only the
// allowed client ranges to the proxy port of VMs tagged with the proxy's
// name. It talks to Compute Engine through the REST clients of
// cloud.google.com/go/compute/apiv1, and is tested against internal/gcpfake
// through those same clients.
//
// # Idempotency without local state
//
// Every insert and delete carries a request ID derived from the resource's
// name, what is asked and (for inserts) a retry window; deletes also name
// the resource's numeric ID. GCE answers a repeated request ID with the
// operation of the first request and changes nothing. So:
//
//   - a Create that crashed after its insert sends it again and gets the same
//     operation back; the name would also stop a second VM (alreadyExists,
//     adopted when the ownership labels match);
//   - an insert that failed in its operation (QUOTA_EXCEEDED,
//     ZONE_RESOURCE_POOL_EXHAUSTED: the VM appears and vanishes) is replayed,
//     not retried, for the rest of its window (DefaultRetryInterval): each
//     reconcile reports the classified error at the cost of one replayed
//     call, and one real insert is made per window;
//   - no operation name has to be stored in the managed resource.
//
// # Provisioning the VM
//
// The instance metadata holds cloud-init user-data (internal/cloudinit) and,
// because Debian's GCE images (the API's default image) ship without
// cloud-init, a startup-script that writes the same files and installs
// squid when it is missing. The guest agent runs it at every boot; on images
// with cloud-init it waits for cloud-init and then finds nothing to do. The
// squid configuration checksum and the htpasswd file (a bcrypt hash) are kept
// in metadata keys of their own, for Observe. The startup-script also puts
// the metadata guard in place (see metadataGuard): squid's user may not
// reach the metadata server, which hands out service account tokens.
//
// # What a tenant may name
//
// A GCPProxy names a static address and a service account in a project
// other teams may share. A named address is used only when it carries this
// proxy's ownership labels, or none at all and the provider config lists
// it; the proxy then claims it by writing its labels before its VM uses it,
// so it stays the proxy's while the VM is replaced and after the proxy is
// deleted (see claimAddress). A service account is used only when the
// provider config lists it (see WithAllowedServiceAccounts), with narrow
// scopes.
//
// # Updates
//
// A change of the proxy configuration or credentials reaches the running
// VM through its metadata (setMetadata; the guest's watcher applies it),
// and new labels or network tags are set on it (setLabels, setTags), each
// with the fingerprint it was read with. A change of the machine type or
// service account (or its scopes, or the guest version) deletes the VM;
// Create then makes it again with the same static address, so the egress
// IP stays. The firewall rule is patched in place and a deleted address or
// rule is made again. See Update.
package gcp
