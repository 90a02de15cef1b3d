/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best dot-imported.
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/libvirtd"
)

var _ = registerHealth(healthCase{backend: cluster.BackendKVM, group: "kvm.m.egressproxy.io", broken: brokenKVMConfigs})

var _ = describeBackend(backendCase{
	backend: cluster.BackendKVM,
	// A VM on the sandbox's NAT network (libvirtd.DefaultSubnet).
	egressIP:    MatchRegexp(`^192\.168\.150\.[0-9]+$`),
	backendGone: kvmGone,
	// The VM boots the real guest image under TCG; the provider's serve
	// probe makes it Ready once squid serves (about 30-40 s after boot on
	// an idle machine, minutes on a busy one). A configuration or
	// credentials change is applied to the running guest.
	readyTimeout: kvmReadyTimeout,
	instance:     kvmInstance,
	accessLog:    kvmAccessLog,
	traffic: &trafficCase{
		unavailable: func() string {
			if env.c.Libvirt == nil {
				return "no private libvirtd runs here"
			}
			return ""
		},
		netns:         func() string { return env.c.Libvirt.NetNS },
		composition:   applyTrafficKVMComposition,
		clientCIDR:    func() string { return env.c.Libvirt.Prepared.Subnet.String() },
		privateOrigin: func() string { return env.c.Libvirt.Prepared.Gateway.String() },
		readyTimeout:  kvmReadyTimeout,
	},
	failure: failureCase{
		what:    "its base image volume is missing",
		setup:   applyMissingImageComposition,
		message: ContainSubstring("no-such-image.qcow2"),
	},
})

// kvmReadyTimeout bounds one real guest's boot until squid serves.
const kvmReadyTimeout = 6 * time.Minute

// kvmGone asserts that the private libvirtd has no domain and no volume of
// the deleted proxy, whose libvirt name is the last part of its instance ID.
func kvmGone(_ context.Context, g Gomega, mr *unstructured.Unstructured) {
	id := str(mr, "status", "atProvider", "instanceID")
	g.Expect(id).NotTo(BeEmpty(), "the deleted managed resource had reported its instance ID")
	name := id[strings.LastIndex(id, "/")+1:]
	l := dialLibvirt(g, env.c.Libvirt.URI)
	defer l.Disconnect() //nolint:errcheck // Read only.
	_, err := l.DomainLookupByName(name)
	g.Expect(err).To(HaveOccurred(), "domain %s is left", name)
	pool, err := l.StoragePoolLookupByName(libvirtd.DefaultPool)
	g.Expect(err).NotTo(HaveOccurred())
	vols, _, err := l.StoragePoolListAllVolumes(pool, 1, 0)
	g.Expect(err).NotTo(HaveOccurred())
	for _, v := range vols {
		g.Expect(v.Name).NotTo(HavePrefix(name), "volume %s is left", v.Name)
	}
}

// kvmInstance reads, from the private libvirtd, the domain's UUID, the
// creation time in its metadata, and the guest's boot ID through the guest
// agent.
func kvmInstance(_ context.Context, g Gomega, mr *unstructured.Unstructured) instanceIdentity {
	id := str(mr, "status", "atProvider", "instanceID")
	g.Expect(id).NotTo(BeEmpty(), "the managed resource reports its instance ID")
	l := dialLibvirt(g, env.c.Libvirt.URI)
	defer l.Disconnect() //nolint:errcheck // Read only.
	dom, err := l.DomainLookupByName(id[strings.LastIndex(id, "/")+1:])
	g.Expect(err).NotTo(HaveOccurred())
	desc, err := l.DomainGetXMLDesc(dom, 0)
	g.Expect(err).NotTo(HaveOccurred())
	created := createdAtRE.FindStringSubmatch(desc)
	g.Expect(created).To(HaveLen(2), "the domain's metadata has its creation time")
	return instanceIdentity{ID: hex.EncodeToString(dom.UUID[:]), CreatedAt: created[1], BootID: guestRun(g, l, dom, "/bin/cat", "/proc/sys/kernel/random/boot_id")}
}

// kvmAccessLog reads squid's access log from the VM's journal, where the
// platform's log agent would (docs/platform.md), through the guest agent.
func kvmAccessLog(_ context.Context, g Gomega, mr *unstructured.Unstructured) string {
	id := str(mr, "status", "atProvider", "instanceID")
	l := dialLibvirt(g, env.c.Libvirt.URI)
	defer l.Disconnect() //nolint:errcheck // Read only.
	dom, err := l.DomainLookupByName(id[strings.LastIndex(id, "/")+1:])
	g.Expect(err).NotTo(HaveOccurred())
	return guestRun(g, l, dom, "/bin/journalctl", vmAccessLogArgs...)
}

// vmAccessLogArgs prints a VM's access log as docs/platform.md says.
var vmAccessLogArgs = []string{"SYSLOG_FACILITY=20", "-o", "cat", "--no-pager", "-n", "500"}

var createdAtRE = regexp.MustCompile(`<(?:[a-z]+:)?createdAt>([^<]+)</`)

// guestRun returns what a program prints in the guest, run through the
// guest agent. An agent that misses a call on a loaded machine is asked
// again: the instance watch calls this twice a second.
func guestRun(g Gomega, l *golibvirt.Libvirt, dom golibvirt.Domain, path string, args ...string) string {
	var out string
	var err error
	for range 3 {
		if out, err = guestRunOnce(l, dom, path, args); err == nil {
			return out
		}
		time.Sleep(time.Second)
	}
	g.Expect(err).NotTo(HaveOccurred(), "%s %v in the guest", path, args)
	return ""
}

func guestRunOnce(l *golibvirt.Libvirt, dom golibvirt.Domain, path string, args []string) (string, error) {
	type reply struct {
		Return struct {
			PID      int    `json:"pid"`
			Exited   bool   `json:"exited"`
			ExitCode int    `json:"exitcode"`
			OutData  string `json:"out-data"`
		} `json:"return"`
	}
	call := func(cmd any) (reply, error) {
		var r reply
		b, err := json.Marshal(cmd)
		if err != nil {
			return r, err
		}
		out, err := l.QEMUDomainAgentCommand(dom, string(b), 5, 0)
		if err != nil {
			return r, err
		}
		if len(out) != 1 {
			return r, fmt.Errorf("the agent answered %d results", len(out))
		}
		return r, json.Unmarshal([]byte(out[0]), &r)
	}
	start, err := call(map[string]any{"execute": "guest-exec", "arguments": map[string]any{"path": path, "arg": args, "capture-output": true}})
	if err != nil {
		return "", err
	}
	for range 50 {
		st, err := call(map[string]any{"execute": "guest-exec-status", "arguments": map[string]any{"pid": start.Return.PID}})
		if err != nil {
			return "", err
		}
		if st.Return.Exited {
			if st.Return.ExitCode != 0 {
				return "", fmt.Errorf("exit code %d", st.Return.ExitCode)
			}
			out, err := base64.StdEncoding.DecodeString(st.Return.OutData)
			return strings.TrimSpace(string(out)), err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return "", errors.New("did not finish")
}

func dialLibvirt(g Gomega, uri string) *golibvirt.Libvirt {
	u, err := url.Parse(uri)
	g.Expect(err).NotTo(HaveOccurred())
	l, err := golibvirt.ConnectToURI(u)
	g.Expect(err).NotTo(HaveOccurred())
	return l
}

// applyMissingImageComposition applies the shipped kvm Composition with a
// base image volume that does not exist (applyComposition).
func applyMissingImageComposition(ctx context.Context) map[string]string {
	return applyComposition(ctx, cluster.BackendKVM, "kvm-missing-image", func(input map[string]any) {
		kvm := input["kvm"].(map[string]any) //nolint:forcetypeassert // The shipped input has the section.
		kvm["baseImageVolume"], kvm["domainType"] = "no-such-image.qcow2", "qemu"
	})
}

// applyTrafficKVMComposition applies the sandbox's kvm Composition without
// guardrails, so that a claim can allow a private destination and see squid
// refuse it (denyPrivateDestinations).
func applyTrafficKVMComposition(ctx context.Context) map[string]string {
	labels := map[string]string{labelE2E: "kvm-traffic"}
	comp := cluster.KVMSandboxComposition("xegressproxies-kvm-e2e-traffic", labels)
	Expect(cluster.Apply(ctx, env.c.Client, comp)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(env.c.Client.Delete(ctx, comp))).To(Succeed()) })
	return labels
}
