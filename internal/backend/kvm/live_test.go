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
	"strings"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/google/go-cmp/cmp"
	"libvirt.org/go/libvirtxml"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/cloudinit"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// guestAgent is a guest agent in front of the fake libvirt: guest-exec of
// a path answers with the status given for that path (or err), and every
// request is recorded.
type guestAgent struct {
	*fake
	status map[string]string
	err    error
	execs  []guestExecInput
}

func (g *guestAgent) QEMUDomainAgentCommand(_ context.Context, _ golibvirt.Domain, cmd string, _ int32) (string, error) {
	if g.err != nil {
		return "", g.err
	}
	var req struct {
		Execute   string          `json:"execute"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal([]byte(cmd), &req); err != nil {
		return "", err
	}
	switch req.Execute {
	case "guest-exec":
		var in guestExecInput
		if err := json.Unmarshal(req.Arguments, &in); err != nil {
			return "", err
		}
		g.execs = append(g.execs, in)
		return fmt.Sprintf(`{"return":{"pid":%d}}`, len(g.execs)), nil
	case "guest-exec-status":
		var st guestExecStatus
		if err := json.Unmarshal(req.Arguments, &st); err != nil {
			return "", err
		}
		return g.status[g.execs[st.PID-1].Path], nil
	}
	return "", fmt.Errorf("unexpected command %s", req.Execute)
}

func failed(code int, stderr string) string {
	return fmt.Sprintf(`{"return":{"exited":true,"exitcode":%d,"err-data":%q}}`, code, base64.StdEncoding.EncodeToString([]byte(stderr)))
}

// metaOf reads the fake domain's metadata.
func metaOf(t *testing.T, f *fake, name string) metadata {
	t.Helper()
	x := &libvirtxml.Domain{}
	if err := x.Unmarshal(f.domains[name].xml); err != nil {
		t.Fatal(err)
	}
	m, ok, err := parseMetadata(x.Metadata.XML)
	if err != nil || !ok {
		t.Fatalf("metadata of %s: %v, ours=%t", name, err, ok)
	}
	return m
}

// applied is what egressproxy-apply got on its stdin.
type applied struct {
	Path string
	Argv []string
	Conf string
	// HtpasswdFor is the password the htpasswd accepts, of those tried.
	HtpasswdFor string
	Port        string
}

func decodeApply(t *testing.T, in guestExecInput, passwords ...string) applied {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(in.InputData)
	if err != nil {
		t.Fatal(err)
	}
	a := applied{Path: in.Path, Argv: in.Arg}
	for _, line := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "conf":
			b, _ := base64.StdEncoding.DecodeString(v)
			a.Conf = string(b)
		case "htpasswd":
			b, _ := base64.StdEncoding.DecodeString(v)
			for _, pw := range passwords {
				if squid.HtpasswdMatches(b, "egressproxy", pw) {
					a.HtpasswdFor = pw
				}
			}
		case "port":
			a.Port = v
		default:
			t.Errorf("unexpected stdin line %q", k)
		}
	}
	return a
}

func renderConf(t *testing.T, d Desired) string {
	t.Helper()
	c, err := squid.Render(squidConfig(d))
	if err != nil {
		t.Fatal(err)
	}
	return string(c)
}

func TestUpdateLive(t *testing.T) {
	d := desired()
	changed := desired(withDestinations("api.example.org"))
	rotated := desired(withPassword("another-password"))
	kept := state{Domains: map[string]golibvirt.DomainState{d.Name: golibvirt.DomainRunning}, Volumes: map[string]uint64{overlayName(d.Name): 2 * gib, seedName(d.Name): 1234}}
	passwords := []string{"s3cret-password", "another-password"}
	type want struct {
		state   state
		class   backend.Class
		errText string
		applied []applied
		// sum and password are what the metadata records afterwards.
		sum      string
		password string
	}
	cases := map[string]struct {
		reason string
		mods   []domainModifier
		d      Desired
		agent  guestAgent
		want   want
	}{
		"NewAllowlist": {
			reason: "A new allowlist is applied to the running guest, with the htpasswd it has, and then recorded.",
			d:      changed,
			agent:  guestAgent{status: map[string]string{cloudinit.ApplyScriptPath: exited(0, "applied "+squid.ChecksumString(renderConf(t, changed))+"\n")}},
			want: want{
				state:    kept,
				applied:  []applied{{Path: cloudinit.ApplyScriptPath, Argv: []string{}, Conf: renderConf(t, changed), HtpasswdFor: "s3cret-password", Port: "3128"}},
				sum:      squid.ChecksumString(renderConf(t, changed)),
				password: "s3cret-password",
			},
		},
		"Rotation": {
			reason: "New credentials are applied as a new htpasswd, with the same squid.conf.",
			d:      rotated,
			agent:  guestAgent{status: map[string]string{cloudinit.ApplyScriptPath: exited(0, "applied "+squid.ChecksumString(renderConf(t, d))+"\n")}},
			want: want{
				state:    kept,
				applied:  []applied{{Path: cloudinit.ApplyScriptPath, Argv: []string{}, Conf: renderConf(t, d), HtpasswdFor: "another-password", Port: "3128"}},
				sum:      squid.ChecksumString(renderConf(t, d)),
				password: "another-password",
			},
		},
		"GuestRefuses": {
			reason: "A configuration the guest refuses is an error with its reason; the metadata keeps what the guest serves.",
			d:      changed,
			agent:  guestAgent{status: map[string]string{cloudinit.ApplyScriptPath: failed(1, "squid -k parse refused the configuration: squid.conf(9): unrecognized\n")}},
			want: want{
				state:    kept,
				class:    backend.ClassTransient,
				errText:  "the guest did not apply the configuration (exit code 1): squid -k parse refused the configuration: squid.conf(9): unrecognized",
				applied:  []applied{{Path: cloudinit.ApplyScriptPath, Argv: []string{}, Conf: renderConf(t, changed), HtpasswdFor: "s3cret-password", Port: "3128"}},
				sum:      squid.ChecksumString(renderConf(t, d)),
				password: "s3cret-password",
			},
		},
		"AgentDown": {
			reason: "A guest agent that does not answer is a Transient error; nothing changes.",
			d:      changed,
			agent:  guestAgent{err: golibvirt.Error{Code: uint32(golibvirt.ErrAgentUnresponsive), Message: "Guest agent is not responding"}},
			want: want{
				state:    kept,
				class:    backend.ClassTransient,
				errText:  "the guest agent cannot run /usr/local/sbin/egressproxy-apply: " + msgAgentDown,
				sum:      squid.ChecksumString(renderConf(t, d)),
				password: "s3cret-password",
			},
		},
		"OldGuest": {
			reason: "A VM made before its guest had the apply program is replaced.",
			mods:   []domainModifier{withGuestVersion("")},
			d:      changed,
			want:   want{state: noParts()},
		},
		"MemoryToo": {
			reason: "A change that needs a new VM replaces it, whatever else changed.",
			d:      desired(withDestinations("api.example.org"), withMemory(512)),
			want:   want{state: noParts()},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFake(append(healthyVolumes(d), withDomain(ourDomain(t, d, tc.mods...), golibvirt.DomainRunning, 1))...)
			g := tc.agent
			g.fake = f
			err := testBackend(&g, nil).Update(context.Background(), tc.d)
			if diff := cmp.Diff(tc.want.class, backend.ClassOf(err)); diff != "" {
				t.Errorf("%s\nUpdate(...): -want class, +got class:\n%s\nerror: %v", tc.reason, diff, err)
			}
			if err != nil && !strings.Contains(err.Error(), tc.want.errText) {
				t.Errorf("%s\nUpdate(...): want an error with %q, got %v", tc.reason, tc.want.errText, err)
			}
			if diff := cmp.Diff(tc.want.state, stateOf(f)); diff != "" {
				t.Errorf("%s\nUpdate(...): -want, +got:\n%s", tc.reason, diff)
			}
			var got []applied
			for _, in := range g.execs {
				got = append(got, decodeApply(t, in, passwords...))
			}
			if diff := cmp.Diff(tc.want.applied, got); diff != "" {
				t.Errorf("%s\nUpdate(...): -want applied, +got:\n%s", tc.reason, diff)
			}
			if tc.want.sum == "" {
				return
			}
			m := metaOf(t, f, d.Name)
			if diff := cmp.Diff(tc.want.sum, m.ConfigChecksum); diff != "" {
				t.Errorf("%s\nmetadata checksum: -want, +got:\n%s", tc.reason, diff)
			}
			if !squid.HtpasswdMatches([]byte(m.Htpasswd), "egressproxy", tc.want.password) {
				t.Errorf("%s\nmetadata htpasswd does not accept %q", tc.reason, tc.want.password)
			}
			if diff := cmp.Diff(guestVersion, m.Guest); diff != "" || !m.ownedBy(d.Ownership) || m.CreatedAt != created {
				t.Errorf("%s\nmetadata lost its guest version, ownership or creation time: %+v", tc.reason, m)
			}
		})
	}
}

// TestObserveDuringChange: while a change is applied, the guest serves the
// previous configuration, so the proxy stays Ready, reports the checksum it
// serves and is not up to date.
func TestObserveDuringChange(t *testing.T) {
	d := desired()
	changed := desired(withDestinations("api.example.org"))
	served := squid.ChecksumString(renderConf(t, d))
	f := newFake(append(healthyVolumes(d), withDomain(ourDomain(t, d), golibvirt.DomainRunning, 1),
		withAddress(d.Name, golibvirt.DomainInterfaceAddressesSrcLease, MACAddress(testUID), "192.168.150.10"))...)
	g := &agentFake{service: f, status: exited(0, "egressproxy-traffic allowed=1 denied_destination=0 denied_client=0 denied_auth=0 bytes_to_clients=10 bytes_from_clients=5\n")}
	o, err := testBackend(g, nil, WithServeProbe(), WithClock(func() time.Time { return created })).Observe(context.Background(), changed)
	if err != nil {
		t.Fatal(err)
	}
	want := observation(d, func(o *Observation) {
		o.UpToDate = false
		o.Diff = "config checksum: want " + squid.ChecksumString(renderConf(t, changed)) + ", got " + served
		o.Traffic = &squid.Traffic{Allowed: 1, BytesToClients: 10, BytesFromClients: 5}
		o.TrafficAt = created
	})
	if diff := cmp.Diff(want, o); diff != "" {
		t.Errorf("Observe(...): -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(served, g.argv[4]); diff != "" {
		t.Errorf("the probe's checksum: want the served one: -want, +got:\n%s", diff)
	}
}
