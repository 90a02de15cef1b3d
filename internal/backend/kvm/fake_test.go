/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"sort"
	"strings"

	golibvirt "github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"
)

var _ service = &fake{}
var _ service = rpc{}

// fake is an in-memory libvirt: domains by name, pools of volumes. errs
// makes a call fail: the key is the method name, optionally "Method name"
// for one domain or volume.
type fake struct {
	driver   string
	domains  map[string]*fakeDomain
	pools    map[string]map[string]*libvirtxml.StorageVolume
	errs     map[string]error
	uploaded map[string][]byte
	calls    []string
	// onDefine runs when DomainDefineXML fails with an injected error.
	onDefine func()
}

type fakeDomain struct {
	xml    string
	state  domainState
	ifaces map[golibvirt.DomainInterfaceAddressesSource][]golibvirt.DomainInterface
}

type fakeModifier func(*fake)

func newFake(mods ...fakeModifier) *fake {
	f := &fake{
		driver:   DriverQEMU,
		domains:  map[string]*fakeDomain{},
		pools:    map[string]map[string]*libvirtxml.StorageVolume{testPool: {}},
		errs:     map[string]error{},
		uploaded: map[string][]byte{},
	}
	f.addVolume(testPool, &libvirtxml.StorageVolume{
		Name:     testBase,
		Capacity: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: 1 << 30},
		Target:   &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: "qcow2"}},
	})
	for _, m := range mods {
		m(f)
	}
	return f
}

func withErr(key string, err error) fakeModifier {
	return func(f *fake) { f.errs[key] = err }
}

func withDriver(drv string) fakeModifier {
	return func(f *fake) { f.driver = drv }
}

// withDomain defines a domain from a builder's XML.
func withDomain(x *libvirtxml.Domain, state golibvirt.DomainState, reason int32) fakeModifier {
	return func(f *fake) {
		if x.UUID == "" {
			x.UUID = fakeUUID(x.Name)
		}
		doc, err := x.Marshal()
		if err != nil {
			panic(err)
		}
		f.domains[x.Name] = &fakeDomain{xml: doc, state: domainState{State: state, Reason: reason}, ifaces: map[golibvirt.DomainInterfaceAddressesSource][]golibvirt.DomainInterface{}}
	}
}

func withAddress(name string, src golibvirt.DomainInterfaceAddressesSource, mac, ip string) fakeModifier {
	return func(f *fake) {
		f.domains[name].ifaces[src] = []golibvirt.DomainInterface{{Hwaddr: golibvirt.OptString{mac}, Addrs: []golibvirt.DomainIPAddr{{Type: 0, Addr: ip, Prefix: 24}}}}
	}
}

func withVolume(pool, name string, capacity uint64) fakeModifier {
	return func(f *fake) {
		f.addVolume(pool, &libvirtxml.StorageVolume{Name: name, Capacity: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: capacity}})
	}
}

func (f *fake) addVolume(pool string, x *libvirtxml.StorageVolume) {
	if x.Target == nil {
		x.Target = &libvirtxml.StorageVolumeTarget{}
	}
	x.Target.Path = "/" + pool + "/" + x.Name
	f.pools[pool][x.Name] = x
}

func (f *fake) err(method, name string) error {
	f.calls = append(f.calls, method+" "+name)
	if err, ok := f.errs[method+" "+name]; ok {
		return err
	}
	return f.errs[method]
}

func noDomain() error {
	return golibvirt.Error{Code: uint32(golibvirt.ErrNoDomain), Message: "Domain not found"}
}
func noVolume() error {
	return golibvirt.Error{Code: uint32(golibvirt.ErrNoStorageVol), Message: "Storage volume not found"}
}
func noPool() error {
	return golibvirt.Error{Code: uint32(golibvirt.ErrNoStoragePool), Message: "Storage pool not found"}
}
func lvErr(code golibvirt.ErrorNumber, msg string) error {
	return golibvirt.Error{Code: uint32(code), Message: msg}
}

func (f *fake) Driver(_ context.Context) (string, error) { return f.driver, f.err("Driver", "") }

func (f *fake) DomainLookupByName(_ context.Context, name string) (golibvirt.Domain, error) {
	if err := f.err("DomainLookupByName", name); err != nil {
		return golibvirt.Domain{}, err
	}
	if _, ok := f.domains[name]; !ok {
		return golibvirt.Domain{}, noDomain()
	}
	return golibvirt.Domain{Name: name}, nil
}

func (f *fake) domain(method string, dom golibvirt.Domain) (*fakeDomain, error) {
	if err := f.err(method, dom.Name); err != nil {
		return nil, err
	}
	d, ok := f.domains[dom.Name]
	if !ok {
		return nil, noDomain()
	}
	return d, nil
}

func (f *fake) DomainGetState(_ context.Context, dom golibvirt.Domain) (domainState, error) {
	d, err := f.domain("DomainGetState", dom)
	if err != nil {
		return domainState{}, err
	}
	return d.state, nil
}

func (f *fake) DomainGetXMLDesc(_ context.Context, dom golibvirt.Domain) (string, error) {
	d, err := f.domain("DomainGetXMLDesc", dom)
	if err != nil {
		return "", err
	}
	return d.xml, nil
}

func (f *fake) DomainDefineXML(_ context.Context, doc string) (golibvirt.Domain, error) {
	x := &libvirtxml.Domain{}
	if err := x.Unmarshal(doc); err != nil {
		return golibvirt.Domain{}, lvErr(golibvirt.ErrXMLError, err.Error())
	}
	if err := f.err("DomainDefineXML", x.Name); err != nil {
		if f.onDefine != nil {
			f.onDefine()
		}
		return golibvirt.Domain{}, err
	}
	// As libvirt: the same name and UUID replace the definition; a new
	// document has no UUID, so it gets one and collides with the old.
	if old, ok := f.domains[x.Name]; ok {
		if x.UUID == "" || x.UUID != uuidOf(old.xml) {
			return golibvirt.Domain{}, lvErr(golibvirt.ErrOperationFailed, "operation failed: domain '"+x.Name+"' already exists with uuid 1")
		}
		old.xml = doc
		return golibvirt.Domain{Name: x.Name}, nil
	}
	if x.UUID == "" {
		x.UUID = fakeUUID(x.Name)
		var err error
		if doc, err = x.Marshal(); err != nil {
			return golibvirt.Domain{}, lvErr(golibvirt.ErrXMLError, err.Error())
		}
	}
	f.domains[x.Name] = &fakeDomain{xml: doc, state: domainState{State: golibvirt.DomainShutoff}, ifaces: map[golibvirt.DomainInterfaceAddressesSource][]golibvirt.DomainInterface{}}
	return golibvirt.Domain{Name: x.Name}, nil
}

// fakeUUID is the UUID the fake gives a domain defined without one.
func fakeUUID(name string) string {
	sum := sha256.Sum256([]byte(name))
	u := hex.EncodeToString(sum[:16])
	return u[:8] + "-" + u[8:12] + "-" + u[12:16] + "-" + u[16:20] + "-" + u[20:]
}

func uuidOf(doc string) string {
	x := &libvirtxml.Domain{}
	if err := x.Unmarshal(doc); err != nil {
		return ""
	}
	return x.UUID
}

func (f *fake) DomainCreate(_ context.Context, dom golibvirt.Domain) error {
	d, err := f.domain("DomainCreate", dom)
	if err != nil {
		return err
	}
	if d.state.State == golibvirt.DomainRunning {
		return lvErr(golibvirt.ErrOperationInvalid, "domain is already running")
	}
	d.state = domainState{State: golibvirt.DomainRunning, Reason: 1}
	return nil
}

func (f *fake) DomainDestroy(_ context.Context, dom golibvirt.Domain) error {
	d, err := f.domain("DomainDestroy", dom)
	if err != nil {
		return err
	}
	if d.state.State != golibvirt.DomainRunning {
		return lvErr(golibvirt.ErrOperationInvalid, "domain is not running")
	}
	d.state = domainState{State: golibvirt.DomainShutoff, Reason: 2}
	return nil
}

func (f *fake) DomainUndefineFlags(_ context.Context, dom golibvirt.Domain, flags golibvirt.DomainUndefineFlagsValues) error {
	if err := f.err("DomainUndefineFlags", dom.Name); err != nil {
		if flags != 0 {
			return err
		}
	}
	if _, ok := f.domains[dom.Name]; !ok {
		return noDomain()
	}
	delete(f.domains, dom.Name)
	return nil
}

func (f *fake) DomainInterfaceAddresses(_ context.Context, dom golibvirt.Domain, src golibvirt.DomainInterfaceAddressesSource) ([]golibvirt.DomainInterface, error) {
	d, err := f.domain("DomainInterfaceAddresses", dom)
	if err != nil {
		return nil, err
	}
	if src == golibvirt.DomainInterfaceAddressesSrcAgent && len(d.ifaces[src]) == 0 {
		return nil, lvErr(golibvirt.ErrAgentUnresponsive, "Guest agent is not responding")
	}
	return d.ifaces[src], nil
}

// DomainSetMetadata does what libvirt does with our element: it takes an
// element in the default namespace and keeps it under prefix.
func (f *fake) DomainSetMetadata(_ context.Context, dom golibvirt.Domain, element, prefix, ns string) error {
	d, err := f.domain("DomainSetMetadata", dom)
	if err != nil {
		return err
	}
	if d.state.State != golibvirt.DomainRunning {
		return lvErr(golibvirt.ErrOperationInvalid, "domain is not running")
	}
	var in struct {
		XMLName xml.Name
		metadataIn
	}
	if err := xml.Unmarshal([]byte(element), &in); err != nil {
		return lvErr(golibvirt.ErrXMLError, err.Error())
	}
	if in.XMLName.Space != ns || prefix != metadataPrefix || strings.Contains(element, "<"+prefix+":") {
		return lvErr(golibvirt.ErrXMLError, "Failed to create a new XML namespace")
	}
	m, ok, err := in.metadata()
	if err != nil || !ok {
		return lvErr(golibvirt.ErrXMLError, "unexpected metadata")
	}
	x := &libvirtxml.Domain{}
	if err := x.Unmarshal(d.xml); err != nil {
		return lvErr(golibvirt.ErrXMLError, err.Error())
	}
	inner, err := m.marshal()
	if err != nil {
		return err
	}
	x.Metadata = &libvirtxml.DomainMetadata{XML: inner}
	d.xml, err = x.Marshal()
	return err
}

func (f *fake) ConnectListAllDomains(_ context.Context) ([]golibvirt.Domain, error) {
	if err := f.err("ConnectListAllDomains", ""); err != nil {
		return nil, err
	}
	out := make([]golibvirt.Domain, 0, len(f.domains))
	for n := range f.domains {
		out = append(out, golibvirt.Domain{Name: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (f *fake) ConnectListAllStoragePools(_ context.Context) ([]golibvirt.StoragePool, error) {
	if err := f.err("ConnectListAllStoragePools", ""); err != nil {
		return nil, err
	}
	out := make([]golibvirt.StoragePool, 0, len(f.pools))
	for n := range f.pools {
		out = append(out, golibvirt.StoragePool{Name: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (f *fake) StoragePoolLookupByName(_ context.Context, name string) (golibvirt.StoragePool, error) {
	if err := f.err("StoragePoolLookupByName", name); err != nil {
		return golibvirt.StoragePool{}, err
	}
	if _, ok := f.pools[name]; !ok {
		return golibvirt.StoragePool{}, noPool()
	}
	return golibvirt.StoragePool{Name: name}, nil
}

func (f *fake) StoragePoolListAllVolumes(_ context.Context, p golibvirt.StoragePool) ([]golibvirt.StorageVol, error) {
	if err := f.err("StoragePoolListAllVolumes", p.Name); err != nil {
		return nil, err
	}
	out := make([]golibvirt.StorageVol, 0, len(f.pools[p.Name]))
	for n := range f.pools[p.Name] {
		out = append(out, golibvirt.StorageVol{Pool: p.Name, Name: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (f *fake) StorageVolLookupByName(_ context.Context, p golibvirt.StoragePool, name string) (golibvirt.StorageVol, error) {
	if err := f.err("StorageVolLookupByName", name); err != nil {
		return golibvirt.StorageVol{}, err
	}
	if _, ok := f.pools[p.Name][name]; !ok {
		return golibvirt.StorageVol{}, noVolume()
	}
	return golibvirt.StorageVol{Pool: p.Name, Name: name}, nil
}

func (f *fake) StorageVolGetXMLDesc(_ context.Context, v golibvirt.StorageVol) (string, error) {
	if err := f.err("StorageVolGetXMLDesc", v.Name); err != nil {
		return "", err
	}
	x, ok := f.pools[v.Pool][v.Name]
	if !ok {
		return "", noVolume()
	}
	return x.Marshal()
}

func (f *fake) StorageVolCreateXML(_ context.Context, p golibvirt.StoragePool, doc string) (golibvirt.StorageVol, error) {
	x := &libvirtxml.StorageVolume{}
	if err := x.Unmarshal(doc); err != nil {
		return golibvirt.StorageVol{}, lvErr(golibvirt.ErrXMLError, err.Error())
	}
	if err := f.err("StorageVolCreateXML", x.Name); err != nil {
		return golibvirt.StorageVol{}, err
	}
	if _, ok := f.pools[p.Name][x.Name]; ok {
		return golibvirt.StorageVol{}, lvErr(golibvirt.ErrStorageVolExist, "storage volume '"+x.Name+"' exists already")
	}
	f.addVolume(p.Name, x)
	return golibvirt.StorageVol{Pool: p.Name, Name: x.Name}, nil
}

func (f *fake) StorageVolUpload(_ context.Context, v golibvirt.StorageVol, data []byte) error {
	if err := f.err("StorageVolUpload", v.Name); err != nil {
		return err
	}
	f.uploaded[v.Name] = data
	return nil
}

func (f *fake) StorageVolDelete(_ context.Context, v golibvirt.StorageVol) error {
	if err := f.err("StorageVolDelete", v.Name); err != nil {
		return err
	}
	if _, ok := f.pools[v.Pool][v.Name]; !ok {
		return noVolume()
	}
	delete(f.pools[v.Pool], v.Name)
	return nil
}
