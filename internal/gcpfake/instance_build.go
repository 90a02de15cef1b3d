package gcpfake

import (
	"fmt"
	"sort"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// builtInstance is a validated, normalized instance that is not stored yet.
type builtInstance struct {
	inst    *computepb.Instance
	statics []key // reserved addresses used as natIP
	cpus    int
}

// buildInstance validates an insert request the way GCE does synchronously
// (400 invalid/required) and fills every server-side field except addresses,
// which are allocated only once the insert is known to succeed.
func (s *Server) buildInstance(k key, in *computepb.Instance) (*builtInstance, *apiError) {
	zone := strings.TrimPrefix(k.scope, "zones/")
	if e := s.v.checkName("resource.name", in.GetName()); e != nil {
		return nil, e
	}
	if e := s.v.checkLabels("resource.labels", in.GetLabels()); e != nil {
		return nil, e
	}
	mtLink, mtName, e := s.v.normalizeMachineType(k.project, zone, in.GetMachineType())
	if e != nil {
		return nil, e
	}
	inst := proto.CloneOf(in)
	inst.MachineType = proto.String(mtLink)
	if e := s.buildDisks(k, inst); e != nil {
		return nil, e
	}
	statics, e := s.buildNICs(k, inst)
	if e != nil {
		return nil, e
	}
	if e := s.buildMetadataAndTags(inst); e != nil {
		return nil, e
	}
	now := s.cfg.clock()
	inst.Kind = proto.String("compute#instance")
	inst.Id = proto.Uint64(s.st.newID())
	inst.CreationTimestamp = proto.String(timestamp(now))
	inst.SelfLink = proto.String(k.link("instances"))
	inst.Zone = proto.String(scopeLink(k.project, k.scope))
	inst.Status = proto.String("PROVISIONING")
	inst.CpuPlatform = proto.String("Unknown CPU Platform")
	inst.StartRestricted = proto.Bool(false)
	inst.DeletionProtection = proto.Bool(inst.GetDeletionProtection())
	inst.LabelFingerprint = proto.String(labelFingerprint(inst.GetLabels()))
	inst.Fingerprint = proto.String(fingerprint(k.name, fmt.Sprint(inst.GetId())))
	inst.Scheduling = defaultScheduling(inst.GetScheduling())
	return &builtInstance{inst: inst, statics: statics, cpus: machineCPUs(mtName)}, nil
}

func (s *Server) buildDisks(k key, inst *computepb.Instance) *apiError {
	if len(inst.GetDisks()) == 0 {
		return errInvalid("resource.disks", "", "At least one disk, the boot disk, must be specified.")
	}
	boots := 0
	for i, d := range inst.GetDisks() {
		f := fmt.Sprintf("resource.disks[%d]", i)
		if d.GetBoot() {
			boots++
		}
		if d.Source == nil && d.InitializeParams == nil {
			return errInvalid(f, "", "Either source or initializeParams must be specified.")
		}
		if ip := d.GetInitializeParams(); ip != nil {
			img := ip.GetSourceImage()
			if img == "" && ip.GetSourceSnapshot() == "" && (i == 0 || d.GetBoot()) {
				return errRequired(f + ".initializeParams.sourceImage")
			}
			if img != "" && !s.v.image.MatchString(img) {
				return errInvalid(f+".initializeParams.sourceImage", img, "The URL is malformed.")
			}
			name := ip.GetDiskName()
			if name == "" {
				name = k.name
				if i > 0 {
					name = fmt.Sprintf("%s-%d", k.name, i)
				}
			}
			size := ip.GetDiskSizeGb()
			if size == 0 {
				size = 10
			}
			d.Source = proto.String(key{project: k.project, scope: k.scope, name: name}.link("disks"))
			d.DiskSizeGb = proto.Int64(size)
			d.InitializeParams = nil // GET never returns it
		}
		d.Kind = proto.String("compute#attachedDisk")
		d.Index = proto.Int32(int32(i))
		d.Boot = proto.Bool(d.GetBoot())
		d.AutoDelete = proto.Bool(d.GetAutoDelete())
		setDefault(&d.DeviceName, fmt.Sprintf("persistent-disk-%d", i))
		setDefault(&d.Type, "PERSISTENT")
		setDefault(&d.Mode, "READ_WRITE")
		setDefault(&d.Interface, "SCSI")
	}
	if boots > 1 {
		return errInvalid("resource.disks", "", "Only one boot disk can be specified.")
	}
	if boots == 0 {
		inst.Disks[0].Boot = proto.Bool(true)
	}
	return nil
}

func (s *Server) buildNICs(k key, inst *computepb.Instance) ([]key, *apiError) {
	region := regionOf(strings.TrimPrefix(k.scope, "zones/"))
	var statics []key
	for i, n := range inst.GetNetworkInterfaces() {
		f := fmt.Sprintf("resource.networkInterfaces[%d]", i)
		network, e := s.v.normalizeNetwork(f+".network", k.project, n.GetNetwork())
		if e != nil {
			return nil, e
		}
		n.Network = proto.String(network)
		switch {
		case n.GetSubnetwork() != "":
			sub, e := s.v.normalizeSubnetwork(f+".subnetwork", k.project, region, n.GetSubnetwork())
			if e != nil {
				return nil, e
			}
			n.Subnetwork = proto.String(sub)
		case lastSegment(network) == "default":
			// The auto-mode default network has one subnet per region.
			n.Subnetwork = proto.String(linkBase + "projects/" + k.project + "/regions/" + region + "/subnetworks/default")
		}
		if ip := n.GetNetworkIP(); ip != "" {
			if e := checkIPv4(f+".networkIP", ip); e != nil {
				return nil, e
			}
		}
		n.Name = proto.String(fmt.Sprintf("nic%d", i))
		n.Kind = proto.String("compute#networkInterface")
		setDefault(&n.StackType, "IPV4_ONLY")
		if len(n.GetAccessConfigs()) > 1 {
			return nil, errInvalid(f+".accessConfigs", "", "At most one access config currently supported.")
		}
		for j, ac := range n.GetAccessConfigs() {
			st, e := s.buildAccessConfig(fmt.Sprintf("%s.accessConfigs[%d]", f, j), k.project, region, ac)
			if e != nil {
				return nil, e
			}
			statics = append(statics, st...)
		}
		n.Fingerprint = proto.String(fingerprint(k.name, n.GetName(), network))
	}
	return statics, nil
}

func (s *Server) buildAccessConfig(f, project, region string, ac *computepb.AccessConfig) ([]key, *apiError) {
	ac.Kind = proto.String("compute#accessConfig")
	setDefault(&ac.Type, "ONE_TO_ONE_NAT")
	if ac.GetType() != "ONE_TO_ONE_NAT" {
		return nil, errInvalid(f+".type", ac.GetType(), "Only ONE_TO_ONE_NAT is supported.")
	}
	setDefault(&ac.Name, "External NAT")
	setDefault(&ac.NetworkTier, "PREMIUM")
	ip := ac.GetNatIP()
	if ip == "" {
		return nil, nil
	}
	if e := checkIPv4(f+".natIP", ip); e != nil {
		return nil, e
	}
	if ak, ok := s.addressByIP(project, region, ip); ok {
		return []key{ak}, nil
	}
	return nil, errInvalid(f+".natIP", ip,
		fmt.Sprintf("The specified external IP address '%s' was not found in region '%s'.", ip, region))
}

func (s *Server) buildMetadataAndTags(inst *computepb.Instance) *apiError {
	md := inst.GetMetadata()
	if md == nil {
		md = &computepb.Metadata{}
		inst.Metadata = md
	}
	if e := s.checkMetadata("resource.metadata", md); e != nil {
		return e
	}
	md.Kind = proto.String("compute#metadata")
	md.Fingerprint = proto.String(metadataFingerprint(md))
	tags := inst.GetTags()
	if tags == nil {
		tags = &computepb.Tags{}
		inst.Tags = tags
	}
	for i, t := range tags.GetItems() {
		if e := s.v.checkName(fmt.Sprintf("resource.tags.items[%d]", i), t); e != nil {
			return e
		}
	}
	tags.Fingerprint = proto.String(fingerprint(tags.GetItems()...))
	return nil
}

// GCE's metadata limits: each value at most 256 KiB, keys and values of
// all items together at most 512 KiB.
const (
	maxMetadataValue = 256 * 1024
	maxMetadataTotal = 512 * 1024
)

// checkMetadata validates metadata items as insert and setMetadata do:
// key syntax, no duplicates, and GCE's size limits. field names the
// metadata in the request ("resource.metadata" in an insert, "resource"
// in a setMetadata, whose body is the metadata).
func (s *Server) checkMetadata(field string, md *computepb.Metadata) *apiError {
	seen := map[string]bool{}
	size := 0
	for i, it := range md.GetItems() {
		k := it.GetKey()
		if !s.v.metaKey.MatchString(k) {
			return errInvalid(fmt.Sprintf("%s.items[%d].key", field, i), k, "Must be a match of regex '[a-zA-Z0-9-_]{1,128}'")
		}
		if seen[k] {
			return errInvalid(field+".items", k, "Duplicate keys are not allowed.")
		}
		seen[k] = true
		if len(it.GetValue()) > maxMetadataValue {
			return errInvalid(fmt.Sprintf("%s.items[%d].value", field, i), k, "Metadata value exceeds 256 KB.")
		}
		size += len(k) + len(it.GetValue())
	}
	if size > maxMetadataTotal {
		return errInvalid(field, "", "Metadata total size exceeds 512 KB.")
	}
	return nil
}

// metadataFingerprint changes whenever a key or value does.
func metadataFingerprint(md *computepb.Metadata) string {
	parts := make([]string, 0, 2*len(md.GetItems()))
	for _, it := range md.GetItems() {
		parts = append(parts, it.GetKey(), it.GetValue())
	}
	return fingerprint(parts...)
}

func labelFingerprint(labels map[string]string) string {
	parts := make([]string, 0, 2*len(labels))
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, k, labels[k])
	}
	return fingerprint(parts...)
}

func defaultScheduling(in *computepb.Scheduling) *computepb.Scheduling {
	sc := proto.CloneOf(in)
	if sc == nil {
		sc = &computepb.Scheduling{}
	}
	if sc.AutomaticRestart == nil {
		sc.AutomaticRestart = proto.Bool(!sc.GetPreemptible())
	}
	sc.Preemptible = proto.Bool(sc.GetPreemptible())
	setDefault(&sc.OnHostMaintenance, map[bool]string{true: "TERMINATE", false: "MIGRATE"}[sc.GetPreemptible()])
	setDefault(&sc.ProvisioningModel, "STANDARD")
	return sc
}

func setDefault(p **string, v string) {
	if *p == nil || **p == "" {
		*p = proto.String(v)
	}
}
