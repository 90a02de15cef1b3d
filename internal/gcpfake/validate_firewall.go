package gcpfake

import (
	"fmt"
	"strconv"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// normalizeFirewall validates a firewall and fills GCE's defaults: network
// default, direction INGRESS, priority 1000, and a 0.0.0.0/0 source (or
// destination) range when the rule names none.
func (s *Server) normalizeFirewall(project string, fw *computepb.Firewall) *apiError {
	if e := s.v.checkName("resource.name", fw.GetName()); e != nil {
		return e
	}
	network, e := s.v.normalizeNetwork("resource.network", project, fw.GetNetwork())
	if e != nil {
		return e
	}
	fw.Network = proto.String(network)
	setDefault(&fw.Direction, "INGRESS")
	if d := fw.GetDirection(); d != "INGRESS" && d != "EGRESS" {
		return errInvalid("resource.direction", d, "Must be INGRESS or EGRESS.")
	}
	if fw.Priority == nil {
		fw.Priority = proto.Int32(1000)
	}
	if p := fw.GetPriority(); p < 0 || p > 65535 {
		return errInvalid("resource.priority", strconv.Itoa(int(p)), "Must be between 0 and 65535.")
	}
	if e := checkRules(fw); e != nil {
		return e
	}
	for i, c := range fw.GetSourceRanges() {
		if e := checkCIDR(fmt.Sprintf("resource.sourceRanges[%d]", i), c); e != nil {
			return e
		}
	}
	for i, c := range fw.GetDestinationRanges() {
		if e := checkCIDR(fmt.Sprintf("resource.destinationRanges[%d]", i), c); e != nil {
			return e
		}
	}
	for i, t := range fw.GetTargetTags() {
		if e := s.v.checkName(fmt.Sprintf("resource.targetTags[%d]", i), t); e != nil {
			return e
		}
	}
	if fw.GetDirection() == "INGRESS" && len(fw.GetSourceRanges())+len(fw.GetSourceTags())+len(fw.GetSourceServiceAccounts()) == 0 {
		fw.SourceRanges = []string{"0.0.0.0/0"}
	}
	if fw.GetDirection() == "EGRESS" && len(fw.GetDestinationRanges()) == 0 {
		fw.DestinationRanges = []string{"0.0.0.0/0"}
	}
	fw.Disabled = proto.Bool(fw.GetDisabled())
	if fw.LogConfig == nil {
		fw.LogConfig = &computepb.FirewallLogConfig{Enable: proto.Bool(false)}
	}
	return nil
}

// checkRules checks that exactly one of allowed and denied is set and that
// each rule names a protocol, with ports only where ports exist.
func checkRules(fw *computepb.Firewall) *apiError {
	type rule struct {
		proto string
		ports []string
	}
	var rules []rule
	field := "resource.allowed"
	for _, a := range fw.GetAllowed() {
		rules = append(rules, rule{a.GetIPProtocol(), a.GetPorts()})
	}
	if len(fw.GetDenied()) > 0 {
		if len(rules) > 0 {
			return errInvalid("resource", "", "Exactly one of 'allowed' or 'denied' must be specified.")
		}
		field = "resource.denied"
		for _, d := range fw.GetDenied() {
			rules = append(rules, rule{d.GetIPProtocol(), d.GetPorts()})
		}
	}
	if len(rules) == 0 {
		return errInvalid("resource", "", "Exactly one of 'allowed' or 'denied' must be specified.")
	}
	for i, r := range rules {
		f := fmt.Sprintf("%s[%d]", field, i)
		if r.proto == "" {
			return errRequired(f + ".IPProtocol")
		}
		if !validProtocol(r.proto) {
			return errInvalid(f+".IPProtocol", r.proto, "Must be a protocol name or number.")
		}
		if len(r.ports) > 0 && r.proto != "tcp" && r.proto != "udp" && r.proto != "sctp" && r.proto != "all" {
			return errInvalid(f+".ports", r.ports[0], "Ports may only be specified for tcp, udp or sctp.")
		}
		for j, p := range r.ports {
			if e := checkPort(fmt.Sprintf("%s.ports[%d]", f, j), p); e != nil {
				return e
			}
		}
	}
	return nil
}

func validProtocol(p string) bool {
	switch p {
	case "tcp", "udp", "icmp", "esp", "ah", "sctp", "ipip", "all":
		return true
	}
	n, err := strconv.Atoi(p)
	return err == nil && n >= 0 && n <= 255
}
