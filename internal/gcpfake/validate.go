package gcpfake

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// nameRE is RFC 1035 as GCE applies it to resource names.
const nameRE = `[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?`

type validators struct {
	name       *regexp.Regexp
	labelKey   *regexp.Regexp
	labelValue *regexp.Regexp
	metaKey    *regexp.Regexp
	image      *regexp.Regexp
	machine    *regexp.Regexp
	network    *regexp.Regexp
	subnetwork *regexp.Regexp
}

func newValidators() *validators {
	return &validators{
		name:       regexp.MustCompile(`^` + nameRE + `$`),
		labelKey:   regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`),
		labelValue: regexp.MustCompile(`^[a-z0-9_-]{0,63}$`),
		metaKey:    regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`),
		image:      regexp.MustCompile(`^(?:` + regexp.QuoteMeta(linkBase) + `)?(?:projects/[^/]+/)?global/images/(?:family/)?[^/]+$`),
		machine:    regexp.MustCompile(`^(?:` + regexp.QuoteMeta(linkBase) + `)?(?:projects/([^/]+)/)?zones/([^/]+)/machineTypes/([^/]+)$`),
		network:    regexp.MustCompile(`^(?:` + regexp.QuoteMeta(linkBase) + `)?(?:projects/([^/]+)/)?global/networks/(` + nameRE + `)$`),
		subnetwork: regexp.MustCompile(`^(?:` + regexp.QuoteMeta(linkBase) + `)?(?:projects/([^/]+)/)?regions/([^/]+)/subnetworks/(` + nameRE + `)$`),
	}
}

func (v *validators) checkName(field, name string) *apiError {
	if name == "" {
		return errRequired(field)
	}
	if !v.name.MatchString(name) {
		return errInvalid(field, name, "Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'")
	}
	return nil
}

func (v *validators) checkLabels(field string, labels map[string]string) *apiError {
	if len(labels) > 64 {
		return errInvalid(field, fmt.Sprint(len(labels)), "Too many labels: at most 64 are allowed.")
	}
	for k, val := range labels {
		if !v.labelKey.MatchString(k) {
			return errInvalid(field+"."+k, k, "Label keys must start with a lowercase letter and contain only lowercase letters, digits, '_' and '-' (at most 63 characters).")
		}
		if !v.labelValue.MatchString(val) {
			return errInvalid(field+"."+k, val, "Label values may contain only lowercase letters, digits, '_' and '-' (at most 63 characters).")
		}
	}
	return nil
}

// normalizeNetwork turns "default", "global/networks/default" or a full link
// into the full link GCE returns.
func (v *validators) normalizeNetwork(field, project, network string) (string, *apiError) {
	if network == "" {
		network = "default"
	}
	if v.name.MatchString(network) {
		return linkBase + "projects/" + project + "/global/networks/" + network, nil
	}
	m := v.network.FindStringSubmatch(network)
	if m == nil {
		return "", errInvalid(field, network, "The URL is malformed.")
	}
	if m[1] != "" {
		project = m[1]
	}
	return linkBase + "projects/" + project + "/global/networks/" + m[2], nil
}

func (v *validators) normalizeSubnetwork(field, project, region, subnet string) (string, *apiError) {
	if v.name.MatchString(subnet) {
		return linkBase + "projects/" + project + "/regions/" + region + "/subnetworks/" + subnet, nil
	}
	m := v.subnetwork.FindStringSubmatch(subnet)
	if m == nil {
		return "", errInvalid(field, subnet, "The URL is malformed.")
	}
	if m[2] != region {
		return "", errInvalid(field, subnet, "Subnetwork must be in region '"+region+"'.")
	}
	if m[1] != "" {
		project = m[1]
	}
	return linkBase + "projects/" + project + "/regions/" + region + "/subnetworks/" + m[3], nil
}

// normalizeMachineType accepts the partial URL GCE wants
// (zones/<z>/machineTypes/<t>) or a full link, and rejects a bare name as the
// real API does.
func (v *validators) normalizeMachineType(project, zone, mt string) (string, string, *apiError) {
	const field = "resource.machineType"
	if mt == "" {
		return "", "", errRequired(field)
	}
	m := v.machine.FindStringSubmatch(mt)
	if m == nil {
		return "", "", errInvalid(field, mt, "The URL is malformed.")
	}
	if m[2] != zone {
		return "", "", errInvalid(field, mt, "Machine type must be in zone '"+zone+"'.")
	}
	if m[1] != "" {
		project = m[1]
	}
	return linkBase + "projects/" + project + "/zones/" + zone + "/machineTypes/" + m[3], m[3], nil
}

func checkIPv4(field, ip string) *apiError {
	a, err := netip.ParseAddr(ip)
	if err != nil || !a.Is4() {
		return errInvalid(field, ip, "Invalid IPv4 address.")
	}
	return nil
}

func checkCIDR(field, cidr string) *apiError {
	if _, err := netip.ParsePrefix(cidr); err == nil {
		return nil
	}
	if _, err := netip.ParseAddr(cidr); err == nil {
		return nil
	}
	return errInvalid(field, cidr, "Must be a CIDR address range.")
}

// checkPort accepts "80" or "8000-8080" within 0..65535.
func checkPort(field, p string) *apiError {
	lo, hi, isRange := strings.Cut(p, "-")
	var a, b int
	if _, err := fmt.Sscanf(lo, "%d", &a); err != nil || fmt.Sprint(a) != lo || a < 0 || a > 65535 {
		return errInvalid(field, p, "Must be a port number or a port range.")
	}
	if !isRange {
		return nil
	}
	if _, err := fmt.Sscanf(hi, "%d", &b); err != nil || fmt.Sprint(b) != hi || b < a || b > 65535 {
		return errInvalid(field, p, "Must be a port number or a port range.")
	}
	return nil
}
