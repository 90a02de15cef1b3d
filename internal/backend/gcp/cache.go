/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"context"
	"fmt"
	"sync"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"golang.org/x/sync/singleflight"
	"google.golang.org/api/iterator"
	"google.golang.org/protobuf/proto"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// A steady-state Observe reads the instance, address and firewall rule of
// its proxy from lists shared by every proxy of the backend, and makes one
// call of its own: the guest attribute, which only the guest writes and
// which says whether squid serves. The lists are per zone (instances), per
// region (addresses) and per project (firewall rules), refreshed when older
// than the TTL, so their cost per proxy shrinks with the number of proxies.
//
// The cache belongs to one Backend, and so to one provider config and its
// credentials (the factory builds a Backend per config and credentials
// version): a proxy is never served from what another config's credentials
// listed. It lives in memory only: after a restart the first Observe lists
// again. It never decides on its own that a part is missing: a list is
// filtered (to what this provider made), so a part not in it (a user-named
// address, a foreign resource under the proxy's name, or one deleted since)
// is read with its own GET, as is every part of a proxy that Create, Update
// or Delete changed after the lists began (read-your-writes).

// DefaultListTTL is how old a shared list may be before an Observe lists
// again; drift made by someone else (a deleted instance, an opened firewall
// rule) is seen within the poll interval plus this. It is the default poll:
// each zone's instances are listed once a poll, not twice. Decoding the
// list (every instance's metadata, cloud-init's user-data among it) was
// about half of a steady poll's CPU at 1000 proxies with 30 s
// (docs/bench.md at 22cd24f, "polls in phase").
const DefaultListTTL = time.Minute

const (
	errFmtListInstances = "cannot list instances in zone %s"
	errFmtListAddresses = "cannot list addresses in region %s"
	errListFirewalls    = "cannot list firewall rules"
)

// listPageSize bounds a list call's page. The compute client reads a page's
// body whole and decodes it at once, with every instance's metadata
// (cloud-init's user-data, the startup script, squid.conf): a page of 500,
// the largest GCE serves, held 28 MB of body and up to ~100 MB in all at
// once at 1000 proxies, which set the provider's peak RSS (docs/bench.md).
const listPageSize = 100

const (
	kindInstances = "instances"
	kindAddresses = "addresses"
	kindFirewalls = "firewalls"
)

// listKey names one shared list.
type listKey struct{ kind, scope, filter string }

// listing is the result of one list call (all its pages).
type listing struct {
	// gen orders the listing against writes: it began after every write
	// whose touch has a lower generation had ended.
	gen   uint64
	at    time.Time
	items map[string]proto.Message
	err   error
}

// partsCache holds the shared lists of one Backend.
type partsCache struct {
	ttl time.Duration
	// calls makes concurrent callers share one list call.
	calls singleflight.Group

	mu  sync.Mutex
	gen uint64
	// lists are the latest finished listing of each key.
	lists map[listKey]*listing
	// touched is the generation at which a write to a proxy's parts (by
	// proxyKey) last ended.
	touched map[string]uint64
}

func newPartsCache(ttl time.Duration) *partsCache {
	return &partsCache{ttl: ttl, lists: map[listKey]*listing{}, touched: map[string]uint64{}}
}

// touch records that a write to the parts of proxy s has ended: listings
// that began before now are not used for s.
func (c *partsCache) touch(s spec) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.touched[proxyKey(s)] = c.gen
}

// fresh reports whether all of ls began after the last write to s, and
// forgets that write once they did.
func (c *partsCache) fresh(s spec, ls ...*listing) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := proxyKey(s)
	t, ok := c.touched[k]
	if !ok {
		return true
	}
	for _, l := range ls {
		if l.gen <= t {
			return false
		}
	}
	delete(c.touched, k)
	return true
}

// get returns the listing of k, listing again with fetch when the last one
// is older than the TTL or failed. Concurrent callers share one call (a
// list's wait is bounded by the call timeout, not by each caller's ctx).
func (c *partsCache) get(ctx context.Context, k listKey, now time.Time, fetch func(context.Context) (map[string]proto.Message, error)) (*listing, error) {
	v, _, _ := c.calls.Do(k.kind+"\x00"+k.scope+"\x00"+k.filter, func() (any, error) {
		c.mu.Lock()
		if l := c.lists[k]; l != nil && now.Sub(l.at) < c.ttlOf(l) && !now.Before(l.at) {
			c.mu.Unlock()
			return l, nil
		}
		c.gen++
		l := &listing{gen: c.gen, at: now}
		c.mu.Unlock()
		// The list serves other proxies' Observes too: the caller's
		// cancellation must not fail theirs (the call timeout bounds it).
		l.items, l.err = fetch(context.WithoutCancel(ctx))
		c.mu.Lock()
		c.lists[k] = l
		c.mu.Unlock()
		return l, nil
	})
	l := v.(*listing) //nolint:forcetypeassert // The call returns nothing else.
	return l, l.err
}

// failedListTTL is how long a failed list answers the Observes that need
// it. Under a 429/503 storm every proxy's Observe asked for the list again
// (about one call per proxy per minute under the reconciler's backoff);
// now each list is asked for once per failedListTTL, and the end of a fault
// is seen at most that much later.
const failedListTTL = 5 * time.Second

// ttlOf is how long l answers: c.ttl, or failedListTTL if it failed.
func (c *partsCache) ttlOf(l *listing) time.Duration {
	if l.err != nil {
		return min(failedListTTL, c.ttl)
	}
	return c.ttl
}

// proxyKey names the parts of a proxy in touched: its instance name, also
// the name of its firewall rule, known even to the garbage collector.
func proxyKey(s spec) string { return s.name }

// Filters of the shared lists. They only make the lists shorter: a part
// missing from a list is read with a GET.
func instanceFilter(o backend.Ownership) string {
	k := backend.CloudLabelKeys
	return fmt.Sprintf("(labels.%s = %q) (labels.%s = %q)", k.ManagedBy, backend.ManagedByValue, k.ProviderInstance, cloudOwnership(o).ProviderInstance)
}

// addressFilter keeps external addresses: the provider's and the ones users
// reserved for proxies (spec.forProvider.address.name) alike.
const addressFilter = `addressType = "EXTERNAL"`

// firewallFilter keeps the rules whose description says this provider made
// them (firewall rules have no labels). GCE matches eq against an RE2
// regular expression over the whole field.
var firewallFilter = fmt.Sprintf(`description eq ".*Managed by %s .*"`, backend.ManagedByValue)

// cachedParts reads the parts of the proxy s describes, from the shared
// lists when they are fresh for it.
func (b *Backend) cachedParts(ctx context.Context, s spec, o backend.Ownership) (parts, error) {
	if b.cache == nil {
		return b.getParts(ctx, s)
	}
	now := b.now()
	il, err := b.cache.get(ctx, listKey{kindInstances, s.zone, instanceFilter(o)}, now, func(ctx context.Context) (map[string]proto.Message, error) {
		return b.listInstances(ctx, s.zone, instanceFilter(o))
	})
	if err != nil {
		return parts{}, err
	}
	al, err := b.cache.get(ctx, listKey{kindAddresses, s.region, addressFilter}, now, func(ctx context.Context) (map[string]proto.Message, error) {
		return b.listAddresses(ctx, s.region)
	})
	if err != nil {
		return parts{}, err
	}
	fl, err := b.cache.get(ctx, listKey{kind: kindFirewalls, filter: firewallFilter}, now, b.listFirewalls)
	if err != nil {
		return parts{}, err
	}
	if !b.cache.fresh(s, il, al, fl) {
		return b.getParts(ctx, s)
	}
	var p parts
	p.instance, _ = il.items[s.name].(*computepb.Instance)
	p.address, _ = al.items[s.addressName].(*computepb.Address)
	p.firewall, _ = fl.items[s.name].(*computepb.Firewall)
	// Not in a list: filtered out, or gone. Only a GET tells which.
	if p.instance == nil {
		if p.instance, err = b.getInstance(ctx, s.zone, s.name); err != nil {
			return parts{}, err
		}
	}
	if p.firewall == nil {
		if p.firewall, err = b.getFirewall(ctx, s.name); err != nil {
			return parts{}, err
		}
	}
	if p.address == nil {
		if p.address, err = b.getAddress(ctx, s.region, s.addressName); err != nil {
			return parts{}, err
		}
	}
	return p, nil
}

func (b *Backend) listInstances(ctx context.Context, zone, filter string) (map[string]proto.Message, error) {
	ctx, cancel := b.call(ctx)
	defer cancel()
	it := b.svc.instances.List(ctx, &computepb.ListInstancesRequest{
		Project: b.project, Zone: zone, Filter: proto.String(filter), MaxResults: proto.Uint32(listPageSize),
	})
	out := map[string]proto.Message{}
	for {
		inst, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return nil, errors.Wrapf(classify(err), errFmtListInstances, zone)
		}
		slim(inst)
		out[inst.GetName()] = inst
	}
}

// listedValue stands for a metadata value the lists do not keep.
const listedValue = "(not kept by the list cache)"

// slim drops the two largest metadata values, the cloud-init user-data and
// the startup-script, which Observe only checks for presence (instanceDiff):
// the lists hold every instance of a zone between polls.
func slim(inst *computepb.Instance) {
	for _, it := range inst.GetMetadata().GetItems() {
		if k := it.GetKey(); (k == MetadataUserData || k == MetadataStartupScript) && it.GetValue() != "" {
			it.Value = proto.String(listedValue)
		}
	}
}

func (b *Backend) listAddresses(ctx context.Context, region string) (map[string]proto.Message, error) {
	ctx, cancel := b.call(ctx)
	defer cancel()
	it := b.svc.addresses.List(ctx, &computepb.ListAddressesRequest{
		Project: b.project, Region: region, Filter: proto.String(addressFilter), MaxResults: proto.Uint32(listPageSize),
	})
	out := map[string]proto.Message{}
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return nil, errors.Wrapf(classify(err), errFmtListAddresses, region)
		}
		out[a.GetName()] = a
	}
}

func (b *Backend) listFirewalls(ctx context.Context) (map[string]proto.Message, error) {
	ctx, cancel := b.call(ctx)
	defer cancel()
	it := b.svc.firewalls.List(ctx, &computepb.ListFirewallsRequest{
		Project: b.project, Filter: proto.String(firewallFilter), MaxResults: proto.Uint32(listPageSize),
	})
	out := map[string]proto.Message{}
	for {
		fw, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return nil, errors.Wrap(classify(err), errListFirewalls)
		}
		out[fw.GetName()] = fw
	}
}
