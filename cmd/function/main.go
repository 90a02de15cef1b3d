/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Command function serves function-egressproxy, the composition function of
// the EgressProxyClaim and the namespaced EgressProxy XR, over gRPC.
package main

import (
	"flag"
	"fmt"
	"os"

	fnsdk "github.com/crossplane/function-sdk-go"

	"github.com/egressproxy/provider-egressproxy/internal/function"
)

// options are the command line flags. They match those of functions built
// from Crossplane's function template, so the usual runtime settings work.
type options struct {
	debug          bool
	network        string
	address        string
	tlsCertsDir    string
	insecure       bool
	metricsAddress string
}

func main() {
	o := options{}
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	fs.BoolVar(&o.debug, "debug", false, "Emit debug logs in addition to info logs.")
	fs.StringVar(&o.network, "network", "tcp", "Network on which to listen for gRPC connections.")
	fs.StringVar(&o.address, "address", ":9443", "Address at which to listen for gRPC connections.")
	// Crossplane's function runtime passes the certificate folder in this
	// environment variable, not as a flag.
	fs.StringVar(&o.tlsCertsDir, "tls-server-certs-dir", os.Getenv("TLS_SERVER_CERTS_DIR"),
		"Folder holding the server certificate (tls.key, tls.crt) and the CA (ca.crt) that signs client certificates. Env: TLS_SERVER_CERTS_DIR.")
	fs.BoolVar(&o.insecure, "insecure", false, "Serve without mTLS: only for crossplane render and local development.")
	// The SDK's default metrics address :8080 clashes with other local
	// processes (a provider's metrics, a second function), so metrics are off
	// unless asked for.
	fs.StringVar(&o.metricsAddress, "metrics-address", "", "Address of the Prometheus metrics endpoint, such as :8080. Off when empty.")
	fs.BoolVar(&o.debug, "d", false, "Shorthand for --debug.")
	_ = fs.Parse(os.Args[1:]) // ExitOnError: Parse exits on a bad flag.

	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "function-egressproxy: %v\n", err)
		os.Exit(1)
	}
}

func run(o options) error {
	log, err := fnsdk.NewLogger(o.debug)
	if err != nil {
		return err
	}
	log.Info("Serving function-egressproxy", "network", o.network, "address", o.address, "insecure", o.insecure)
	return fnsdk.Serve(function.NewFunction(log),
		fnsdk.Listen(o.network, o.address),
		fnsdk.MTLSCertificates(o.tlsCertsDir),
		fnsdk.Insecure(o.insecure),
		fnsdk.WithMetricsServer(o.metricsAddress))
}
