/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package squid renders the squid configuration every backend runs: an
// authenticated forward proxy that only reaches an allowlist of destinations.
//
// The input is a plain Config, not an API type, so each backend converts its
// own spec into it. Render validates every field before it writes a byte,
// because the output is a line-oriented file in which a stray newline or
// space in a hostname would become a directive of its own.
//
// It uses the standard library's errors rather than crossplane-runtime's:
// that package pulls in controller-runtime and client-go, which this
// dependency-light package (and its fuzz build) must not.
//
// Health checking: squid needs nothing extra for a TCP probe (the Kubernetes
// backend's tcpSocket probe on Port). Such a probe connects and closes without
// a request, which squid 5 logs as an "error:transaction-end-before-headers"
// line with status 0; log consumers should ignore those.
package squid

import (
	"bytes"
	"net/netip"
	"time"
)

// Production defaults for the host-specific paths of a Config. They are where
// Debian's squid package puts things, so cloud-init and the container image
// need no extra set-up.
const (
	DefaultHtpasswdPath = "/etc/squid/egressproxy/htpasswd"
	DefaultPIDFile      = "/run/squid.pid"
	DefaultCacheLog     = "/var/log/squid/cache.log"
	DefaultAccessLog    = "/var/log/squid/access.log"
	DefaultCoredumpDir  = "/var/spool/squid"
	DefaultAuthHelper   = "/usr/lib/squid/basic_ncsa_auth"
)

// Limits on the size of a Config. They keep the rendered file, the squid ACL
// trees and an error message small; real allowlists are far below them.
const (
	MaxClientCIDRs  = 256
	MaxDestinations = 512
	MaxConnectPorts = 32
	MaxHTTPPorts    = 32
	MaxPathLength   = 255
)

// Config is what a backend asks of its proxy. Empty host-specific paths take
// the production defaults above; tests override them to run squid in a
// temporary folder.
type Config struct {
	// ListenAddress optionally restricts the listener to one local address.
	// Empty listens on every address.
	ListenAddress string
	// Port is the TCP port squid listens on.
	Port int32
	// ClientCIDRs are the only source ranges that may connect. Empty denies
	// every client.
	ClientCIDRs []string
	// Destinations are exact hostnames, ".suffix" wildcards (matching the
	// domain and every subdomain), or IPv4/IPv6 CIDRs and addresses. Empty
	// denies every destination.
	Destinations []string
	// ConnectPorts are the only ports CONNECT may tunnel to. Empty denies
	// CONNECT.
	ConnectPorts []int32
	// HTTPPorts are the only destination ports plain HTTP requests (every
	// method but CONNECT) may go to. Empty denies plain HTTP.
	HTTPPorts []int32
	// DenyPrivateDestinations denies loopback, private, link-local, CGNAT,
	// documentation, NAT64 and the other special-purpose ranges of RFC 6890
	// and its updates, even when an allowed name resolves to one, so the
	// proxy cannot reach the network it runs in (SSRF). It wins over
	// Destinations. The cloud metadata servers are denied whatever it says.
	DenyPrivateDestinations bool
	// HtpasswdPath is the htpasswd file basic_ncsa_auth reads.
	HtpasswdPath string

	// PIDFile is squid's pid_filename; "none" disables it.
	PIDFile string
	// CacheLog is squid's diagnostic log (cache_log).
	CacheLog string
	// AccessLog is the file the JSON access log is written to, for example
	// /dev/stdout in a container.
	AccessLog string
	// CoredumpDir is where squid may leave a core dump.
	CoredumpDir string
	// AuthHelper is the basic_ncsa_auth program.
	AuthHelper string
	// HostsFile optionally replaces /etc/hosts for name resolution, which
	// tests use to map names such as allowed.test to 127.0.0.1.
	HostsFile string
	// AccessLogSyslog, when set, also sends the access log to syslog (the
	// journal on a VM) with this facility and priority: local0..local7 or
	// daemon, and info or notice, e.g. "local4.info". Each message is one
	// LogFormat line.
	AccessLogSyslog string
	// ShutdownLifetime is how long squid lets open requests and tunnels
	// finish when it stops (SIGTERM, squid -k shutdown), in whole seconds
	// (rounded up), at most MaxShutdownLifetime; zero keeps 10 seconds.
	ShutdownLifetime time.Duration
}

// defaultShutdownLifetime is the shutdown_lifetime, in seconds, of a Config
// without one: short, because a stopping VM or pod should not hold on.
const defaultShutdownLifetime = 10

// MaxFileDescriptors is squid's max_filedescriptors. Without it squid takes
// the soft RLIMIT_NOFILE it starts with, which is 1024 under systemd and in
// many containers: ~500 tunnels. squid raises the soft limit up to the hard
// one (at least 524288 under systemd and containerd); where the hard limit
// is lower, squid logs an error and runs with the hard limit. It takes
// effect on a restart only, never on a reconfigure.
const MaxFileDescriptors = 65536

// spec is a validated, normalised Config: every value in it is safe to write
// into a squid configuration line as it is.
type spec struct {
	listen       netip.Addr
	port         int32
	clients      []netip.Prefix
	names        []string
	nets         []netip.Prefix
	connectPorts []int32
	httpPorts    []int32
	denyPrivate  bool
	htpasswd     string
	pidFile      string
	cacheLog     string
	accessLog    string
	coredumpDir  string
	authHelper   string
	hostsFile    string
	// accessLogSyslog is empty for no syslog log.
	accessLogSyslog string
	// shutdownLifetime is in seconds.
	shutdownLifetime int
}

// Render validates c and returns the squid configuration for it. The output
// is deterministic: lists whose order does not matter are sorted and
// deduplicated, so Checksum of it only changes when the policy changes.
func Render(c Config) ([]byte, error) {
	s, err := validate(c)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	write(&b, s)
	return b.Bytes(), nil
}

func withDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
