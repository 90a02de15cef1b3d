/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package crash

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"
)

// libvirt's RPC protocol (src/rpc/virnetprotocol.x, remote_protocol.x):
// every packet is a 4-byte big-endian length that counts itself, a header
// of six 4-byte words (program, version, procedure, type, serial, status)
// and an XDR payload. A reply carries the serial of its call.
const (
	rpcRemoteProgram = 0x20008086
	rpcCall          = 0
	rpcReply         = 1
	rpcStatusOK      = 0
	rpcHeaderLen     = 4 + 6*4
	rpcMaxPacket     = 64 << 20

	// Procedures of remote_protocol.x.
	procDomainCreate        = 9
	procDomainDefineXML     = 11
	procDomainUndefine      = 35
	procDomainUndefineFlags = 231
	// procConnectListAllDomains is List's, the garbage collector's.
	procConnectListAllDomains = 273
)

// An rpcProxy passes libvirt RPC between the provider and a libvirtd's
// unix socket, and holds the reply to the DomainCreate its trap catches
// until the provider goes away.
type rpcProxy struct {
	socket, upstream string
	hold             *trap
}

func newRPCProxy(t *testing.T, upstream string) *rpcProxy {
	t.Helper()
	// A short folder: a socket path must fit in sun_path.
	dir, err := os.MkdirTemp("", "crash-")
	if err != nil {
		t.Fatal(err)
	}
	p := &rpcProxy{socket: filepath.Join(dir, "sock"), upstream: upstream, hold: newTrap()}
	ln, err := net.Listen("unix", p.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ln.Close()
		_ = os.RemoveAll(dir)
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

// rpcCallInfo is what the proxy remembers of a call until its reply.
type rpcCallInfo struct {
	held     bool
	name     string
	undefine bool
}

func (p *rpcProxy) serve(c net.Conn) {
	defer c.Close() //nolint:errcheck // Nothing to do about it.
	s, err := net.Dial("unix", p.upstream)
	if err != nil {
		return
	}
	defer s.Close() //nolint:errcheck // Nothing to do about it.
	var mu sync.Mutex
	calls := map[uint32]rpcCallInfo{}
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		// The daemon sees the client leave as it would without a proxy.
		defer s.Close() //nolint:errcheck // Nothing to do about it.
		for {
			pkt, err := readPacket(c)
			if err != nil {
				return
			}
			prog, proc, typ, serial, _ := header(pkt)
			if prog == rpcRemoteProgram && typ == rpcCall {
				// Create makes the overlay and the seed volumes,
				// defines the domain, then starts it.
				hold, before := p.hold.take(proc == procDomainCreate, proc == procDomainDefineXML)
				switch {
				case hold && before:
					// The daemon never sees the define; the
					// provider waits for its reply until it dies.
					p.hold.caught(domainName(xdrString(pkt[rpcHeaderLen:])))
					continue
				case hold:
					mu.Lock()
					calls[serial] = rpcCallInfo{held: true, name: xdrString(pkt[rpcHeaderLen:])}
					mu.Unlock()
				case proc == procConnectListAllDomains:
					p.hold.lists.Add(1)
				case proc == procDomainUndefine || proc == procDomainUndefineFlags:
					mu.Lock()
					calls[serial] = rpcCallInfo{undefine: true}
					mu.Unlock()
				}
			}
			if _, err := s.Write(pkt); err != nil {
				return
			}
		}
	}()
	for {
		pkt, err := readPacket(s)
		if err != nil {
			return
		}
		prog, _, typ, serial, status := header(pkt)
		if prog == rpcRemoteProgram && typ == rpcReply {
			mu.Lock()
			ci, ok := calls[serial]
			delete(calls, serial)
			mu.Unlock()
			if ok && ci.undefine && status == rpcStatusOK {
				p.hold.deleted.Add(1)
			}
			if ok && ci.held {
				p.hold.caught(ci.name)
				select {
				case <-gone:
					return
				case <-time.After(maxHold):
				}
			}
		}
		if _, err := c.Write(pkt); err != nil {
			return
		}
	}
}

var errPacket = errors.New("bad libvirt RPC packet length")

// readPacket reads one whole packet, its length word included.
func readPacket(r io.Reader) ([]byte, error) {
	var l [4]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(l[:])
	if n < rpcHeaderLen || n > rpcMaxPacket {
		return nil, errPacket
	}
	pkt := make([]byte, n)
	copy(pkt, l[:])
	_, err := io.ReadFull(r, pkt[4:])
	return pkt, err
}

func header(pkt []byte) (prog, proc, typ, serial, status uint32) {
	w := func(i int) uint32 { return binary.BigEndian.Uint32(pkt[4+4*i:]) }
	return w(0), w(2), w(3), w(4), w(5)
}

var reDomainName = regexp.MustCompile(`<name>([^<]+)</name>`)

// domainName is the name in a domain's XML.
func domainName(xml string) string {
	if m := reDomainName.FindStringSubmatch(xml); m != nil {
		return m[1]
	}
	return ""
}

// xdrString reads the XDR string a payload starts with: the domain name
// of remote_nonnull_domain.
func xdrString(b []byte) string {
	if len(b) < 4 {
		return ""
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return ""
	}
	return string(b[4 : 4+n])
}
