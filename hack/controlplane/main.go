/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Command controlplane runs a local kube-apiserver and etcd with the
// provider's CRDs installed until it is interrupted, for make dev. It writes
// a kubeconfig for a system:masters user and prints READY when it serves.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

func main() {
	out := flag.String("write-kubeconfig", "", "Write a kubeconfig for the control plane to this path.")
	flag.Parse()
	env, err := kube.New(flag.Args()...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "controlplane:", err)
		os.Exit(1)
	}
	defer env.Stop()
	if *out != "" {
		if err := kube.WriteKubeconfig(env.Config, *out); err != nil {
			fmt.Fprintln(os.Stderr, "controlplane:", err)
			return
		}
	}
	fmt.Println("READY", env.Config.Host)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
}
