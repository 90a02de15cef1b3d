/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/google/go-cmp/cmp"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
)

func TestShutoffReasons(t *testing.T) {
	shutoff := func(r golibvirt.DomainShutoffReason) domainState {
		return domainState{State: golibvirt.DomainShutoff, Reason: int32(r)}
	}
	cases := map[string]struct {
		reason string
		s      domainState
		want   commonv1alpha1.InstanceState
	}{
		"NeverStarted": {
			reason: "A domain defined but never started (Create killed before it started it) is started, not replaced.",
			s:      shutoff(golibvirt.DomainShutoffUnknown),
			want:   commonv1alpha1.StatePending,
		},
		"Shutdown": {
			reason: "A guest that shut itself down is replaced.",
			s:      shutoff(golibvirt.DomainShutoffShutdown),
			want:   commonv1alpha1.StateStopped,
		},
		"Destroyed": {
			reason: "A destroyed domain is replaced.",
			s:      shutoff(golibvirt.DomainShutoffDestroyed),
			want:   commonv1alpha1.StateStopped,
		},
		"Failed": {
			reason: "A domain that failed to start is replaced.",
			s:      shutoff(golibvirt.DomainShutoffFailed),
			want:   commonv1alpha1.StateStopped,
		},
		"Crashed": {
			reason: "A crashed domain is Terminated.",
			s:      shutoff(golibvirt.DomainShutoffCrashed),
			want:   commonv1alpha1.StateTerminated,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, _ := instanceState(tc.s)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\ninstanceState(%+v): -want, +got:\n%s", tc.reason, tc.s, diff)
			}
		})
	}
}

// TestTestDriverNeverStarted kills Create between defining the domain and
// starting it: the reconciler must see a domain to start (Pending, not up
// to date, so Update runs), and Update must start that same domain rather
// than delete it and make it again.
func TestTestDriverNeverStarted(t *testing.T) {
	b, l := testDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), fastTimeout)
	defer cancel()
	d := desired()
	crash := errors.New("simulated crash")
	b.afterStep = func(s string) error {
		if s == StepDefine {
			return crash
		}
		return nil
	}
	if err := b.Create(ctx, d); !errors.Is(err, crash) {
		t.Fatalf("Create with a crash after defining: want the crash, got %v", err)
	}
	b.afterStep = nil
	dom, err := l.DomainLookupByName(d.Name)
	if err != nil {
		t.Fatal(err)
	}
	o, err := b.Observe(ctx, d)
	if err != nil || o.State != commonv1alpha1.StatePending || o.UpToDate || o.Diff != msgNeverStarted {
		t.Fatalf("Observe of a domain never started: %+v, %v; want Pending, not up to date, %q", o, err, msgNeverStarted)
	}
	if err := b.Update(ctx, d); err != nil {
		t.Fatalf("Update: %v", err)
	}
	after, err := l.DomainLookupByName(d.Name)
	if err != nil || after.UUID != dom.UUID {
		t.Fatalf("Update must start the domain, not replace it: %v, UUID %x -> %x", err, dom.UUID, after.UUID)
	}
	if o, err := b.Observe(ctx, d); err != nil || o.State != commonv1alpha1.StateRunning || !o.UpToDate {
		t.Errorf("Observe after Update: %+v, %v; want running and up to date", o, err)
	}
	wantParts(t, l, d.Name, 1)
}
