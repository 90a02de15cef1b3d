package gcpfake

import (
	"net/http"
	"slices"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"google.golang.org/protobuf/proto"
)

const (
	errFmtNoInstance = "instance projects/%s/zones/%s/instances/%s does not exist"
)

// stepInstance counts one observation of a booting instance.
func (s *Server) stepInstance(k key) {
	rec := s.st.instances[k]
	if rec == nil || !rec.booting {
		return
	}
	rec.obs++
	s.applyBoot(rec)
}

// applyBoot sets the status the boot sequence has reached:
// PROVISIONING, then STAGING, then RUNNING.
func (s *Server) applyBoot(rec *instanceRec) {
	switch {
	case rec.obs < s.cfg.bootProvisioning:
		rec.inst.Status = proto.String("PROVISIONING")
	case rec.obs < s.cfg.bootProvisioning+s.cfg.bootStaging:
		rec.inst.Status = proto.String("STAGING")
	default:
		rec.inst.Status = proto.String("RUNNING")
		rec.inst.CpuPlatform = proto.String("Intel Broadwell")
		rec.inst.LastStartTimestamp = proto.String(timestamp(s.cfg.clock()))
		rec.booting = false
	}
}

// boot restarts the boot sequence at observation obs (start skips
// PROVISIONING) and gives accessConfigs without a natIP a new ephemeral one.
func (s *Server) boot(rec *instanceRec, obs int) {
	rec.obs, rec.booting = obs, true
	for _, n := range rec.inst.GetNetworkInterfaces() {
		for _, ac := range n.GetAccessConfigs() {
			if ac.GetNatIP() == "" {
				if ip, ok := s.st.ephemeral.take(); ok {
					ac.NatIP = proto.String(ip)
				}
			}
		}
	}
	s.applyBoot(rec)
}

// terminate stops an instance. Like real GCE it releases ephemeral external
// IPs (they change across a stop/start) but keeps static ones and the
// internal IP.
func (s *Server) terminate(rec *instanceRec) {
	rec.inst.Status = proto.String("TERMINATED")
	rec.inst.LastStopTimestamp = proto.String(timestamp(s.cfg.clock()))
	rec.booting = false
	for _, n := range rec.inst.GetNetworkInterfaces() {
		for _, ac := range n.GetAccessConfigs() {
			if ip := ac.GetNatIP(); s.st.ephemeral.contains(ip) {
				s.st.ephemeral.release(ip)
				ac.NatIP = nil
			}
		}
	}
}

// allocateInstanceIPs gives each interface its networkIP and each
// accessConfig without a natIP an ephemeral one.
func (s *Server) allocateInstanceIPs(inst *computepb.Instance) *apiError {
	for _, n := range inst.GetNetworkInterfaces() {
		if ip := n.GetNetworkIP(); ip != "" {
			s.st.internal.mark(ip)
		} else {
			ip, ok := s.st.internal.take()
			if !ok {
				return &apiError{Code: http.StatusServiceUnavailable, Reason: ReasonBackendError, Message: "The subnetwork has no free IP addresses."}
			}
			n.NetworkIP = proto.String(ip)
		}
		for _, ac := range n.GetAccessConfigs() {
			if ac.GetNatIP() != "" {
				continue
			}
			ip, ok := s.st.ephemeral.take()
			if !ok {
				return &apiError{Code: http.StatusServiceUnavailable, Reason: ReasonBackendError, Message: "No ephemeral external IP addresses are left."}
			}
			ac.NatIP = proto.String(ip)
		}
	}
	return nil
}

// bindStatics marks reserved addresses IN_USE by the instance at link.
func (s *Server) bindStatics(link string, statics []key) {
	for _, ak := range statics {
		a := s.st.addresses[ak]
		a.Status = proto.String("IN_USE")
		if !slices.Contains(a.Users, link) {
			a.Users = append(a.Users, link)
		}
	}
}

// removeInstance deletes an instance and releases what it held: its internal
// and ephemeral IPs, and its hold on static addresses, which go back to
// RESERVED once nobody uses them.
func (s *Server) removeInstance(k key) {
	rec := s.st.instances[k]
	if rec == nil {
		return
	}
	link := rec.inst.GetSelfLink()
	for _, n := range rec.inst.GetNetworkInterfaces() {
		s.st.internal.release(n.GetNetworkIP())
		for _, ac := range n.GetAccessConfigs() {
			if ip := ac.GetNatIP(); s.st.ephemeral.contains(ip) {
				s.st.ephemeral.release(ip)
			}
		}
	}
	for _, a := range s.st.addresses {
		if i := slices.Index(a.Users, link); i >= 0 {
			a.Users = slices.Delete(a.Users, i, i+1)
			if len(a.Users) == 0 {
				a.Users = nil
				a.Status = proto.String("RESERVED")
			}
		}
	}
	delete(s.st.instances, k)
	rec.notify()
}

// SetInstanceStatus changes an instance's status behind the API's back, as a
// host error, a preemption or someone in the console would. The boot
// sequence stops; TERMINATED (or SUSPENDED) releases ephemeral IPs
// as a real stop does, and RUNNING gives them back.
func (s *Server) SetInstanceStatus(project, zone, name, status string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.st.instances[key{project: project, scope: "zones/" + zone, name: name}]
	if rec == nil {
		return errors.Errorf(errFmtNoInstance, project, zone, name)
	}
	switch status {
	case "TERMINATED", "SUSPENDED":
		s.terminate(rec)
	case "RUNNING":
		s.boot(rec, s.cfg.bootProvisioning+s.cfg.bootStaging)
	}
	rec.booting = false
	rec.inst.Status = proto.String(status)
	return nil
}
