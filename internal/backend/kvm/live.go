/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/cloudinit"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// A change of the squid configuration or of the credentials reaches the
// running VM through the guest agent: guest-exec runs the guest's
// egressproxy-apply (cloudinit.GuestFiles) with the files on its stdin
// (input-data), so nothing secret is in its argv, and the program checks the
// configuration and reconfigures squid without dropping a connection. Only
// then does the domain's metadata record the new checksum and htpasswd:
// metadata says what the guest serves.

// guestVersion is the version of the guest files a seed writes; a domain
// whose metadata records another (or none: made before this) has no apply
// program, so a configuration change replaces it.
const guestVersion = "1"

const (
	errApply        = "cannot apply the configuration through the guest agent"
	errFmtApplyFail = "the guest did not apply the configuration (exit code %d): %s"
	errFmtApplyWhy  = "the guest agent cannot run %s: %s"
	errApplyTimeout = "the guest did not finish applying the configuration in time"
	errFmtApplySum  = "the guest applied configuration %q, not %q"
	errSetMetadata  = "cannot record the applied configuration in the domain's metadata"

	// applyTimeout bounds one apply: squid checks and reconfigures in about
	// a second; a slow (TCG) guest takes longer.
	applyTimeout = 90 * time.Second
	applyEvery   = 300 * time.Millisecond
	// maxApplyReason bounds the guest's reason in an error.
	maxApplyReason = 512
)

// squidConfig is the squid configuration of a VM: the access log also goes
// to syslog, where the guest's traffic counter reads it.
func squidConfig(d Desired) squid.Config {
	c := backend.SquidConfig(d)
	c.AccessLogSyslog = cloudinit.AccessLogSyslog
	return c
}

// liveConfig is what applyLive sends to the guest.
type liveConfig struct {
	conf     []byte
	htpasswd []byte
	port     int32
	checksum string
}

// renderLive renders d's configuration. It keeps the htpasswd the domain
// has when it still accepts the credentials, so an unchanged password is
// not rehashed.
func (b *Backend) renderLive(d Desired, existing string) (liveConfig, error) {
	conf, err := squid.Render(squidConfig(d))
	if err != nil {
		return liveConfig{}, backend.Permanent(errors.Wrap(err, errRender))
	}
	lc := liveConfig{conf: conf, htpasswd: []byte(existing), port: port(d.Proxy), checksum: squid.Checksum(conf)}
	if existing == "" || !b.verifier.HtpasswdMatches(lc.htpasswd, d.Credentials.Username, d.Credentials.Password) {
		if lc.htpasswd, err = b.verifier.HtpasswdCost(d.Credentials.Username, d.Credentials.Password, backend.HtpasswdCost(d.Credentials)); err != nil {
			return liveConfig{}, backend.Permanent(errors.Wrap(err, errHtpasswd))
		}
	}
	return lc, nil
}

// stdin frames the files as egressproxy-apply reads them.
func (lc liveConfig) stdin() []byte {
	return fmt.Appendf(nil, "conf %s\nhtpasswd %s\nport %d\n",
		base64.StdEncoding.EncodeToString(lc.conf), base64.StdEncoding.EncodeToString(lc.htpasswd), lc.port)
}

// guestExecInput is guest-exec with stdin; the agent decodes input-data.
type guestExecInput struct {
	Path          string   `json:"path"`
	Arg           []string `json:"arg"`
	InputData     string   `json:"input-data"`
	CaptureOutput bool     `json:"capture-output"`
}

// applyLive applies d's configuration to the running domain di and records
// it in di's metadata. A guest that refuses it (squid -k parse) or fails
// to serve it keeps its previous configuration, and the error says why.
func (b *Backend) applyLive(ctx context.Context, d Desired, di domainInfo) error {
	a, ok := b.svc.(agentCommander)
	if !ok {
		return backend.Permanent(errors.New(errApply))
	}
	lc, err := b.renderLive(d, di.Meta.Htpasswd)
	if err != nil {
		return err
	}
	out, err := runApply(ctx, a, di.Dom, lc)
	if err != nil {
		return err
	}
	if got := strings.TrimPrefix(strings.TrimPrefix(out, "applied "), "unchanged "); got != lc.checksum {
		return backend.Transient(errors.Errorf(errFmtApplySum, clip(out), lc.checksum))
	}
	m := di.Meta
	m.ConfigChecksum, m.Htpasswd = lc.checksum, string(lc.htpasswd)
	el, err := m.setElement()
	if err != nil {
		return err
	}
	return classify(errors.Wrap(b.svc.DomainSetMetadata(ctx, di.Dom, el, metadataPrefix, MetadataNamespace), errSetMetadata))
}

// runApply runs egressproxy-apply with lc on its stdin and returns its
// output.
func runApply(ctx context.Context, a agentCommander, dom golibvirt.Domain, lc liveConfig) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, applyTimeout)
	defer cancel()
	start, err := agentCall(ctx, a, dom, agentRequest{Execute: "guest-exec", Arguments: guestExecInput{
		Path: cloudinit.ApplyScriptPath, Arg: []string{}, InputData: base64.StdEncoding.EncodeToString(lc.stdin()), CaptureOutput: true,
	}})
	if err != nil {
		return "", errors.Wrap(err, errApply)
	}
	if start.Why != "" {
		return "", backend.Transient(errors.Errorf(errFmtApplyWhy, cloudinit.ApplyScriptPath, start.Why))
	}
	for {
		st, err := agentCall(ctx, a, dom, agentRequest{Execute: "guest-exec-status", Arguments: guestExecStatus{PID: start.PID}})
		if err != nil {
			return "", errors.Wrap(err, errApply)
		}
		if st.Why != "" {
			return "", backend.Transient(errors.Errorf(errFmtApplyWhy, cloudinit.ApplyScriptPath, st.Why))
		}
		if st.Exited {
			out, _ := base64.StdEncoding.DecodeString(st.OutData)
			if st.ExitCode != 0 {
				why, _ := base64.StdEncoding.DecodeString(st.ErrData)
				// A reason from the guest: retried, as a change of the
				// spec may be what fixes it.
				return "", backend.Transient(errors.Errorf(errFmtApplyFail, st.ExitCode, clip(strings.TrimSpace(string(why)))))
			}
			return strings.TrimSpace(string(out)), nil
		}
		select {
		case <-ctx.Done():
			return "", backend.Transient(errors.New(errApplyTimeout))
		case <-time.After(applyEvery):
		}
	}
}

// clip bounds what the guest says, on one line, for an error message.
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "no reason given"
	}
	if len(s) > maxApplyReason {
		return s[:maxApplyReason] + "..."
	}
	return s
}
