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
	"strconv"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/egressproxy/provider-egressproxy/internal/cloudinit"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// Ready = serves. A lease only says the VM booted; with WithServeProbe,
// Observe asks the QEMU guest agent to run a probe inside the guest: squid
// runs, its squid.conf is the rendered one, and it answers HTTP on the
// proxy port. The provider may not reach the VM's network at all (a NAT
// network on a remote host), but it always reaches the agent through
// libvirt.

const (
	msgFmtWaitServe = "running at %s; waiting for squid in the guest to serve the rendered configuration (guest agent: %s)"
	msgAgentDown    = "not answering yet"
	msgProbeRunning = "the probe did not finish"

	errAgent       = "cannot run the serve probe through the guest agent"
	errAgentReply  = "cannot parse the guest agent's reply"
	errFmtAgentRet = "the guest agent returned no %s"

	// agentTimeout is how long libvirt waits for the agent, in seconds.
	agentTimeout = 5
	// The probe gets about 10 s: a guest under TCG on a loaded host, just
	// after a live change, took more than 3 s, and an unfinished probe
	// reports the proxy not Ready.
	probePolls = 33
	probeEvery = 300 * time.Millisecond
)

// probeScript runs as bash -c in the guest with the port and the expected
// sha256 of squid.conf ("" when the user's own user-data configures the
// VM). Its request is refused by squid itself (a client or destination
// rule, or the stock config's to_localhost), so the probe sends no packet
// beyond loopback. It prints why squid does not serve, or else the traffic
// counter's line (cloudinit.TrafficPath; none on a guest without it).
var probeScript = fmt.Sprintf(`port=$1 sum=$2
systemctl is-active --quiet squid || { echo "squid is not running"; exit 1; }
if [ -n "$sum" ]; then
  set -- $(sha256sum /etc/squid/squid.conf 2>/dev/null)
  [ "$1" = "$sum" ] || { echo "/etc/squid/squid.conf is not the rendered configuration"; exit 1; }
fi
exec 3<>/dev/tcp/127.0.0.1/$port 2>/dev/null || { echo "squid does not accept connections on port $port"; exit 1; }
printf 'GET http://127.0.0.1:1/ HTTP/1.0\r\n\r\n' >&3
read -r -t 5 status <&3
case $status in HTTP/1.*) cat %s 2>/dev/null; exit 0 ;; esac
echo "squid does not answer HTTP on port $port"
exit 1`, cloudinit.TrafficPath)

// WithServeProbe makes Observe report Ready only when squid in the guest
// serves the rendered configuration, as the guest agent sees it. The base
// image needs qemu-guest-agent (hack/guest-image.sh has it); without the
// probe, Ready means running with a DHCP lease.
func WithServeProbe() Option {
	return func(b *Backend) { b.probe = true }
}

// agentCommander runs guest agent commands; rpc has it, fakes need not.
type agentCommander interface {
	QEMUDomainAgentCommand(ctx context.Context, dom golibvirt.Domain, cmd string, timeout int32) (string, error)
}

func (r rpc) QEMUDomainAgentCommand(ctx context.Context, dom golibvirt.Domain, cmd string, timeout int32) (string, error) {
	res, err := do(ctx, r.c, func(l *golibvirt.Libvirt) (golibvirt.OptString, error) {
		return l.QEMUDomainAgentCommand(dom, cmd, timeout, 0)
	})
	if err != nil || len(res) == 0 {
		return "", err
	}
	return res[0], nil
}

type agentRequest struct {
	Execute   string `json:"execute"`
	Arguments any    `json:"arguments"`
}

type guestExec struct {
	Path          string   `json:"path"`
	Arg           []string `json:"arg"`
	CaptureOutput bool     `json:"capture-output"`
}

type guestExecStatus struct {
	PID int `json:"pid"`
}

// serves runs the probe and returns whether squid serves, and else the
// Ready message, and the traffic counter when the guest has one. sum is the
// checksum of the configuration the domain serves (its metadata's); it is
// not squid.conf's when the user's own user-data configures the VM.
func (b *Backend) serves(ctx context.Context, dom golibvirt.Domain, d Desired, ip, sum string) (bool, string, *squid.Traffic, error) {
	a, ok := b.svc.(agentCommander)
	if !ok {
		return true, "", nil, nil
	}
	if d.Params.UserDataSecretRef != nil {
		sum = ""
	}
	why, out, err := runProbe(ctx, a, dom, strconv.Itoa(int(port(d.Proxy))), sum)
	if err != nil {
		return false, "", nil, err
	}
	if why != "" {
		return false, fmt.Sprintf(msgFmtWaitServe, ip, why), nil, nil
	}
	if t, ok := squid.ParseTraffic(out); ok {
		return true, "", &t, nil
	}
	return true, "", nil, nil
}

// runProbe returns "" and the probe's output when squid serves, else why
// not. libvirt errors (the agent is not connected yet, 86; exec refused)
// only mean "not yet".
func runProbe(ctx context.Context, a agentCommander, dom golibvirt.Domain, port, sum string) (string, string, error) {
	start, err := agentCall(ctx, a, dom, agentRequest{Execute: "guest-exec", Arguments: guestExec{
		Path: "/bin/bash", Arg: []string{"-c", probeScript, "probe", port, sum}, CaptureOutput: true,
	}})
	if err != nil || start.Why != "" {
		return start.Why, "", err
	}
	for range probePolls {
		st, err := agentCall(ctx, a, dom, agentRequest{Execute: "guest-exec-status", Arguments: guestExecStatus{PID: start.PID}})
		if err != nil || st.Why != "" {
			return st.Why, "", err
		}
		if st.Exited {
			out, _ := base64.StdEncoding.DecodeString(st.OutData)
			if st.ExitCode == 0 {
				return "", string(out), nil
			}
			if s := strings.TrimSpace(string(out)); s != "" {
				return s, "", nil
			}
			return "the probe failed with exit code " + strconv.Itoa(st.ExitCode), "", nil
		}
		select {
		case <-ctx.Done():
			return "", "", classify(ctx.Err())
		case <-time.After(probeEvery):
		}
	}
	return msgProbeRunning, "", nil
}

// agentResult is what guest-exec and guest-exec-status return; Why is set
// when the agent could not be asked.
type agentResult struct {
	PID      int    `json:"pid"`
	Exited   bool   `json:"exited"`
	ExitCode int    `json:"exitcode"`
	OutData  string `json:"out-data"`
	ErrData  string `json:"err-data"`
	Why      string `json:"-"`
}

func agentCall(ctx context.Context, a agentCommander, dom golibvirt.Domain, req agentRequest) (agentResult, error) {
	cmd, err := json.Marshal(req)
	if err != nil {
		return agentResult{}, errors.Wrap(err, errAgent)
	}
	reply, err := a.QEMUDomainAgentCommand(ctx, dom, string(cmd), agentTimeout)
	var le golibvirt.Error
	if errors.As(err, &le) {
		if le.Code == uint32(golibvirt.ErrAgentUnresponsive) {
			return agentResult{Why: msgAgentDown}, nil
		}
		return agentResult{Why: le.Message}, nil
	}
	if err != nil {
		return agentResult{}, classify(errors.Wrap(err, errAgent))
	}
	var r struct {
		Return *agentResult `json:"return"`
	}
	if err := json.Unmarshal([]byte(reply), &r); err != nil {
		return agentResult{}, errors.Wrap(err, errAgentReply)
	}
	if r.Return == nil {
		return agentResult{}, errors.Errorf(errFmtAgentRet, "result")
	}
	return *r.Return, nil
}
