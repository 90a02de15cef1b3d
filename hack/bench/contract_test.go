/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"strings"
	"testing"
	"time"
)

func TestPrintContract(t *testing.T) {
	r := &result{n: 10, synced: 30 * time.Second, cpuSynced: 6, apiSynced: 40}
	b := &baselineResult{exist: 10 * time.Second, cpuExist: 2, apiExist: 10}
	c := &contractResult{what: "seven writes", exist: 20 * time.Second, cpuExist: 3, apiExist: 20, requests: counts{
		{target: controlPlane, verb: "PUT"}:   20,
		{target: targetCluster, verb: "POST"}: 40,
	}}
	var out strings.Builder
	r.printContract(&out, b, c)
	// Each row: provider, POST, contract, ours/contract, contract/POST.
	for _, want := range []string{
		"| time to all Synced (POST baseline: every object created) | 30.0 s | 10.0 s | 20.0 s | 1.50 | 2.00 |",
		"| CPU until all Synced (baselines: bench process) | 6.00 s | 2.00 s | 3.00 s | 2.00 | 1.50 |",
		"| apiserver CPU until all Synced | 40.0 s | 10.0 s | 20.0 s | 2.00 | 2.00 |",
		"| control plane PUT | 2.00 |",
		"| target cluster POST | 4.00 |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printContract: want a line %q, got:\n%s", want, out.String())
		}
	}
}

func TestConnectionSecret(t *testing.T) {
	k := &kubeBench{}
	mr := k.mr(3)
	mr.SetNamespace(contractNamespace)
	mr.SetUID("uid-3")
	s := connectionSecret(mr)
	if s.Namespace != contractNamespace || s.Name != "bench-0003-proxy" {
		t.Errorf("connectionSecret: want %s/bench-0003-proxy, got %s/%s", contractNamespace, s.Namespace, s.Name)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != "uid-3" {
		t.Errorf("connectionSecret: want one owner reference to the MR, got %v", s.OwnerReferences)
	}
	for _, k := range []string{"endpoint", "port", "username", "password", "url"} {
		if len(s.Data[k]) == 0 {
			t.Errorf("connectionSecret: want key %q", k)
		}
	}
}
