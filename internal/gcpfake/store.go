package gcpfake

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
)

// linkBase is what real GCE puts in front of every selfLink. The fake uses it
// too rather than its own URL, so code that parses links sees real ones.
const linkBase = "https://www.googleapis.com/compute/v1/"

// The address ranges the fake hands out. The external ones are documentation
// ranges (RFC 5737) so a fake IP can never reach a real host.
const (
	internalRange  = "10.128.0.0/20"   // the default VPC subnet of us-central1
	staticRange    = "203.0.113.0/24"  // TEST-NET-3: reserved static addresses
	ephemeralRange = "198.51.100.0/24" // TEST-NET-2: ephemeral natIPs
)

type scopeKind int

const (
	scopeZone scopeKind = iota
	scopeRegion
	scopeGlobal
)

// key names one resource: scope is "zones/<z>", "regions/<r>" or "global".
type key struct {
	project, scope, name string
}

// path returns the resource path, e.g. projects/p/zones/z/instances/n.
func (k key) path(collection string) string {
	return "projects/" + k.project + "/" + k.scope + "/" + collection + "/" + k.name
}

func (k key) link(collection string) string { return linkBase + k.path(collection) }

func scopeLink(project, scope string) string { return linkBase + "projects/" + project + "/" + scope }

// lastSegment returns what follows the last slash of a link.
func lastSegment(link string) string { return link[strings.LastIndex(link, "/")+1:] }

type instanceRec struct {
	inst    *computepb.Instance
	obs     int    // observations since the boot sequence began
	booting bool   // whether observations still move the status on
	busy    string // name of a pending stop/delete operation
	// guest holds the guest attributes the VM wrote, by "namespace/key".
	guest map[string]string
	// changed is closed (and replaced) when the metadata changes or the
	// instance goes away: the metadata server's wait_for_change callers
	// wait on it. nil until someone waits.
	changed chan struct{}
}

// watch returns a channel closed at the next change of the instance's
// metadata. The caller holds s.mu.
func (r *instanceRec) watch() <-chan struct{} {
	if r.changed == nil {
		r.changed = make(chan struct{})
	}
	return r.changed
}

// notify wakes every watcher. The caller holds s.mu.
func (r *instanceRec) notify() {
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

type opRec struct {
	op       *computepb.Operation
	key      key
	left     int        // observations left before DONE
	instance *key       // an instance whose boot each poll moves on
	onDone   func()     // applies the change when the operation completes
	fail     *opFailure // makes the operation end with an error
}

func (o *opRec) done() bool { return o.op.GetStatus() == computepb.Operation_DONE }

type store struct {
	seq        uint64
	instances  map[key]*instanceRec
	addresses  map[key]*computepb.Address
	firewalls  map[key]*computepb.Firewall
	ops        map[key]*opRec
	requestIDs map[string]key // project/requestId -> operation
	internal   *ipPool
	static     *ipPool
	ephemeral  *ipPool
}

func newStore(static string) *store {
	return &store{
		instances:  map[key]*instanceRec{},
		addresses:  map[key]*computepb.Address{},
		firewalls:  map[key]*computepb.Firewall{},
		ops:        map[key]*opRec{},
		requestIDs: map[string]key{},
		internal:   newIPPool(internalRange),
		static:     newIPPool(static),
		ephemeral:  newIPPool(ephemeralRange),
	}
}

// newID returns a fresh, deterministic 19-digit id like the ones GCE uses.
func (st *store) newID() uint64 {
	st.seq++
	return 4_200_000_000_000_000_000 + st.seq*1009
}

// ipPool hands out the lowest free host address of a prefix, so runs are
// deterministic and released addresses are reused.
type ipPool struct {
	prefix netip.Prefix
	used   map[netip.Addr]bool
}

func newIPPool(cidr string) *ipPool {
	return &ipPool{prefix: netip.MustParsePrefix(cidr), used: map[netip.Addr]bool{}}
}

func (p *ipPool) take() (string, bool) {
	// .0 is the network, .1 the gateway; the last address is broadcast.
	a := p.prefix.Addr().Next().Next()
	for ; p.prefix.Contains(a) && p.prefix.Contains(a.Next()); a = a.Next() {
		if !p.used[a] {
			p.used[a] = true
			return a.String(), true
		}
	}
	return "", false
}

func (p *ipPool) contains(ip string) bool {
	a, err := netip.ParseAddr(ip)
	return err == nil && p.prefix.Contains(a)
}

func (p *ipPool) mark(ip string) {
	if a, err := netip.ParseAddr(ip); err == nil && p.prefix.Contains(a) {
		p.used[a] = true
	}
}

func (p *ipPool) release(ip string) {
	if a, err := netip.ParseAddr(ip); err == nil {
		delete(p.used, a)
	}
}

// fingerprint mimics GCE's fingerprints: 8 bytes of a hash, base64 encoded.
// Any change of the content changes it, which is all callers rely on.
func fingerprint(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return base64.StdEncoding.EncodeToString(h[:8])
}

// timestamp formats t the way GCE does: RFC 3339 with milliseconds in
// Pacific time (fixed at -08:00 so the fake needs no tz database).
func timestamp(t time.Time) string {
	return t.In(time.FixedZone("PST", -8*3600)).Format("2006-01-02T15:04:05.000-07:00")
}

func opName(t time.Time, seq uint64) string {
	return fmt.Sprintf("operation-%d-%013x-%08x-%08x", t.UnixMilli(), seq*2654435761, seq*40503, seq*2246822519%0xffffffff)
}
