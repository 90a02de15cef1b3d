package gcpfake

import (
	"net/http"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Call names are the API method ids of the discovery document. Calls, faults
// (Match.Call) and the admin endpoint use them.
const (
	CallInstancesInsert         = "compute.instances.insert"
	CallInstancesGet            = "compute.instances.get"
	CallInstancesDelete         = "compute.instances.delete"
	CallInstancesList           = "compute.instances.list"
	CallInstancesAggregatedList = "compute.instances.aggregatedList"
	CallInstancesStart          = "compute.instances.start"
	CallInstancesStop           = "compute.instances.stop"
	CallInstancesGuestAttrs     = "compute.instances.getGuestAttributes"
	CallInstancesSetMetadata    = "compute.instances.setMetadata"
	CallInstancesSetLabels      = "compute.instances.setLabels"
	CallInstancesSetTags        = "compute.instances.setTags"
	CallAddressesInsert         = "compute.addresses.insert"
	CallAddressesGet            = "compute.addresses.get"
	CallAddressesDelete         = "compute.addresses.delete"
	CallAddressesList           = "compute.addresses.list"
	CallAddressesSetLabels      = "compute.addresses.setLabels"
	CallFirewallsInsert         = "compute.firewalls.insert"
	CallFirewallsGet            = "compute.firewalls.get"
	CallFirewallsDelete         = "compute.firewalls.delete"
	CallFirewallsList           = "compute.firewalls.list"
	CallFirewallsPatch          = "compute.firewalls.patch"
	CallZoneOperationsGet       = "compute.zoneOperations.get"
	CallZoneOperationsWait      = "compute.zoneOperations.wait"
	CallRegionOperationsGet     = "compute.regionOperations.get"
	CallRegionOperationsWait    = "compute.regionOperations.wait"
	CallGlobalOperationsGet     = "compute.globalOperations.get"
	CallGlobalOperationsWait    = "compute.globalOperations.wait"
)

const prefix = "/compute/v1/projects/{project}"

// handlerFunc serves one compute call. It returns the response message, or an
// error that is rendered in the GCE envelope (an *apiError keeps its code).
type handlerFunc func(r *http.Request) (proto.Message, error)

type route struct {
	pattern string
	call    string
	h       handlerFunc
}

func (s *Server) routeTable() []route {
	return []route{
		{"POST " + prefix + "/zones/{zone}/instances", CallInstancesInsert, s.insertInstance},
		{"GET " + prefix + "/zones/{zone}/instances", CallInstancesList, s.listInstances},
		{"GET " + prefix + "/zones/{zone}/instances/{name}", CallInstancesGet, s.getInstance},
		{"DELETE " + prefix + "/zones/{zone}/instances/{name}", CallInstancesDelete, s.deleteInstance},
		{"POST " + prefix + "/zones/{zone}/instances/{name}/start", CallInstancesStart, s.startInstance},
		{"POST " + prefix + "/zones/{zone}/instances/{name}/stop", CallInstancesStop, s.stopInstance},
		{"POST " + prefix + "/zones/{zone}/instances/{name}/setMetadata", CallInstancesSetMetadata, s.setMetadata},
		{"POST " + prefix + "/zones/{zone}/instances/{name}/setLabels", CallInstancesSetLabels, s.setInstanceLabels},
		{"POST " + prefix + "/zones/{zone}/instances/{name}/setTags", CallInstancesSetTags, s.setTags},
		{"GET " + prefix + "/zones/{zone}/instances/{name}/getGuestAttributes", CallInstancesGuestAttrs, s.getGuestAttributes},
		{"GET " + prefix + "/aggregated/instances", CallInstancesAggregatedList, s.aggregatedInstances},
		{"POST " + prefix + "/regions/{region}/addresses", CallAddressesInsert, s.insertAddress},
		{"GET " + prefix + "/regions/{region}/addresses", CallAddressesList, s.listAddresses},
		{"GET " + prefix + "/regions/{region}/addresses/{name}", CallAddressesGet, s.getAddress},
		{"DELETE " + prefix + "/regions/{region}/addresses/{name}", CallAddressesDelete, s.deleteAddress},
		{"POST " + prefix + "/regions/{region}/addresses/{name}/setLabels", CallAddressesSetLabels, s.setAddressLabels},
		{"POST " + prefix + "/global/firewalls", CallFirewallsInsert, s.insertFirewall},
		{"GET " + prefix + "/global/firewalls", CallFirewallsList, s.listFirewalls},
		{"GET " + prefix + "/global/firewalls/{name}", CallFirewallsGet, s.getFirewall},
		{"DELETE " + prefix + "/global/firewalls/{name}", CallFirewallsDelete, s.deleteFirewall},
		{"PATCH " + prefix + "/global/firewalls/{name}", CallFirewallsPatch, s.patchFirewall},
		{"GET " + prefix + "/zones/{zone}/operations/{name}", CallZoneOperationsGet, s.getOperation(scopeZone, false)},
		{"POST " + prefix + "/zones/{zone}/operations/{name}/wait", CallZoneOperationsWait, s.getOperation(scopeZone, true)},
		{"GET " + prefix + "/regions/{region}/operations/{name}", CallRegionOperationsGet, s.getOperation(scopeRegion, false)},
		{"POST " + prefix + "/regions/{region}/operations/{name}/wait", CallRegionOperationsWait, s.getOperation(scopeRegion, true)},
		{"GET " + prefix + "/global/operations/{name}", CallGlobalOperationsGet, s.getOperation(scopeGlobal, false)},
		{"POST " + prefix + "/global/operations/{name}/wait", CallGlobalOperationsWait, s.getOperation(scopeGlobal, true)},
	}
}

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	for _, rt := range s.routeTable() {
		mux.Handle(rt.pattern, s.compute(rt.call, rt.h))
	}
	mux.HandleFunc("POST /token", s.handleToken)
	mux.Handle("/_fake/", s.adminHandler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, &apiError{Code: http.StatusNotFound, Reason: ReasonNotFound,
			Message: "The requested URL " + r.URL.Path + " was not found on this server."})
	})
	return mux
}

// compute wraps a handler in what every compute call goes through, in the
// order real GCE applies it: count, authenticate, injected latency and
// errors, then the handler itself.
func (s *Server) compute(call string, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.calls.inc(call)
		if s.cfg.requireAuth && !s.auth.validBearer(r.Header.Get("Authorization")) {
			writeAPIError(w, errUnauthenticated())
			return
		}
		if err := s.faults.delay(r.Context(), call, r); err != nil {
			return // the client gave up; nobody reads a response
		}
		if e := s.faults.takeError(call, r); e != nil {
			writeAPIError(w, e)
			return
		}
		msg, err := h(r)
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) {
				ae = errInternal(err)
			}
			writeAPIError(w, ae)
			return
		}
		writeProto(w, msg)
	})
}

func writeProto(w http.ResponseWriter, m proto.Message) {
	b, err := protojson.Marshal(m)
	if err != nil {
		writeAPIError(w, errInternal(err))
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_, _ = w.Write(b)
}
