/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cloudinit

// ApplyScriptPath is the guest program that applies a new configuration to
// the running squid without a reboot: the KVM backend runs it through the
// guest agent, the GCE guest's metadata watcher runs it on a change.
//
// It reads, on stdin, three lines:
//
//	conf <squid.conf, base64>
//	htpasswd <htpasswd, base64>
//	port <n>
//
// writes the files, checks the configuration (squid -k parse), reconfigures
// squid (squid -k reconfigure), and exits non-zero with the reason on stderr
// when any step fails, leaving the previous files in place.
const ApplyScriptPath = "/usr/local/sbin/egressproxy-apply"

// A File is one file every VM guest gets, whatever writes it (cloud-init's
// write_files on KVM, the startup script on GCE).
type File struct {
	Path        string
	Owner       string
	Permissions string
	Content     string
}

// GuestFiles are the files that give a guest its live-apply program and its
// traffic counter (see squid.TrafficAWK).
// TODO(issue 40, WP5): the files; the stub only fixes the contract.
func GuestFiles() []File { return nil }
