/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/google/go-cmp/cmp"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// agentFake answers guest-exec with pid 7 and guest-exec-status with
// status; err, when set, answers every command.
type agentFake struct {
	service
	status string
	err    error
	argv   []string
}

func (f *agentFake) QEMUDomainAgentCommand(_ context.Context, _ golibvirt.Domain, cmd string, _ int32) (string, error) {
	if f.err != nil {
		return "", f.err
	}
	var req struct {
		Execute   string `json:"execute"`
		Arguments struct {
			Arg []string `json:"arg"`
		} `json:"arguments"`
	}
	if err := json.Unmarshal([]byte(cmd), &req); err != nil {
		return "", err
	}
	if req.Execute == "guest-exec" {
		f.argv = req.Arguments.Arg
		return `{"return":{"pid":7}}`, nil
	}
	return f.status, nil
}

func exited(code int, out string) string {
	return fmt.Sprintf(`{"return":{"exited":true,"exitcode":%d,"out-data":%q}}`, code, base64.StdEncoding.EncodeToString([]byte(out)))
}

func TestServes(t *testing.T) {
	type want struct {
		ready   bool
		msg     string
		traffic *squid.Traffic
		err     error
		sum     string
	}
	cases := map[string]struct {
		reason string
		fake   *agentFake
		d      Desired
		want   want
	}{
		"Serves": {
			reason: "A probe that exits 0 means squid serves the rendered configuration.",
			fake:   &agentFake{status: exited(0, "")},
			d:      desired(),
			want:   want{ready: true, sum: "abc"},
		},
		"ServesWithTraffic": {
			reason: "A probe that exits 0 prints the guest's traffic counter, which is reported.",
			fake:   &agentFake{status: exited(0, "egressproxy-traffic allowed=7 denied_destination=5 denied_client=2 denied_auth=3 bytes_to_clients=1000 bytes_from_clients=200\n")},
			d:      desired(),
			want: want{ready: true, sum: "abc", traffic: &squid.Traffic{
				Allowed: 7, DeniedDestination: 5, DeniedClient: 2, DeniedAuth: 3, BytesToClients: 1000, BytesFromClients: 200,
			}},
		},
		"ServesWithoutTraffic": {
			reason: "Output that is not a traffic line (a guest without the counter) is no figure, and no failure.",
			fake:   &agentFake{status: exited(0, "cat: /var/lib/egressproxy/traffic: No such file\n")},
			d:      desired(),
			want:   want{ready: true, sum: "abc"},
		},
		"SquidStopped": {
			reason: "The probe's output says why squid does not serve.",
			fake:   &agentFake{status: exited(1, "squid is not running\n")},
			d:      desired(),
			want:   want{msg: fmt.Sprintf(msgFmtWaitServe, "192.168.150.10", "squid is not running"), sum: "abc"},
		},
		"AgentNotConnected": {
			reason: "An agent that is not connected yet (86) only means not Ready.",
			fake:   &agentFake{err: golibvirt.Error{Code: uint32(golibvirt.ErrAgentUnresponsive), Message: "not connected"}},
			d:      desired(),
			want:   want{msg: fmt.Sprintf(msgFmtWaitServe, "192.168.150.10", msgAgentDown)},
		},
		"UserData": {
			reason: "With the user's own user-data, squid.conf is not ours to check.",
			fake:   &agentFake{status: exited(0, "")},
			d: desired(func(x *Desired) {
				x.Params.UserDataSecretRef = &commonv1alpha1.LocalSecretKeySelector{}
			}),
			want: want{ready: true, sum: ""},
		},
		"StillRunning": {
			reason: "A probe that never finishes is reported, not waited for.",
			fake:   &agentFake{status: `{"return":{"exited":false}}`},
			d:      desired(),
			want:   want{msg: fmt.Sprintf(msgFmtWaitServe, "192.168.150.10", msgProbeRunning), sum: "abc"},
		},
		"ConnectionLost": {
			reason: "A broken connection is Transient, as every call's.",
			fake:   &agentFake{err: syscall.ECONNRESET},
			d:      desired(),
			want:   want{err: syscall.ECONNRESET},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := &Backend{svc: tc.fake}
			ready, msg, traffic, err := b.serves(context.Background(), golibvirt.Domain{}, tc.d, "192.168.150.10", "abc")
			if tc.want.err != nil {
				if !errors.Is(err, tc.want.err) || backend.ClassOf(err) != backend.ClassTransient {
					t.Errorf("%s\nserves(...): want a Transient %v, got %v", tc.reason, tc.want.err, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nserves(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.ready, ready); diff != "" {
				t.Errorf("%s\nserves(...): -want ready, +got ready:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.msg, msg); diff != "" {
				t.Errorf("%s\nserves(...): -want message, +got message:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.traffic, traffic); diff != "" {
				t.Errorf("%s\nserves(...): -want traffic, +got traffic:\n%s", tc.reason, diff)
			}
			if len(tc.fake.argv) == 5 {
				if diff := cmp.Diff(tc.want.sum, tc.fake.argv[4]); diff != "" {
					t.Errorf("%s\nprobe's expected checksum: -want, +got:\n%s", tc.reason, diff)
				}
			}
		})
	}
}
