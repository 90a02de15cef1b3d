/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package squid

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strconv"
	"strings"
	"sync"
)

// maxSums bounds the checksums a Sums keeps: ~400 bytes each, and a
// provider with more distinct configurations than this renders again now
// and then.
const maxSums = 4096

// Sums remembers the Checksum of the configuration each Config renders to.
// Observe compares a proxy's configuration with the one its parameters ask
// for on every poll; rendering it costs ~50 µs and 20 KB of garbage, most of
// a steady poll's own work, while parameters almost never change. The live
// configuration is compared by its checksum (ChecksumString) instead.
// The zero value is ready to use.
type Sums struct {
	mu   sync.Mutex
	sums map[string]string
}

// Sum returns Checksum(Render(c)), rendering only a Config not seen
// before. A Config that does not render is not remembered.
func (s *Sums) Sum(c Config) (string, error) {
	k := configKey(c)
	s.mu.Lock()
	sum, ok := s.sums[k]
	s.mu.Unlock()
	if ok {
		return sum, nil
	}
	conf, err := Render(c)
	if err != nil {
		return "", err
	}
	sum = Checksum(conf)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sums == nil || len(s.sums) >= maxSums {
		// Forget all: simpler than an LRU, and rare.
		s.sums = map[string]string{}
	}
	s.sums[k] = sum
	return sum, nil
}

// ChecksumString is Checksum of a configuration held in a string, such as
// a ConfigMap's data, without copying it.
func ChecksumString(conf string) string {
	h := sha256.New()
	_, _ = io.WriteString(h, conf)
	return hex.EncodeToString(h.Sum(nil))
}

// configKey is a string that differs for every two different Configs: every
// field in order, lists with their lengths, strings quoted. A field added
// to Config must be added here (TestKeyCoversEveryField).
func configKey(c Config) string {
	var b strings.Builder
	str := func(s string) {
		b.WriteString(strconv.Quote(s))
		b.WriteByte(',')
	}
	strs := func(l []string) {
		b.WriteString(strconv.Itoa(len(l)))
		b.WriteByte('[')
		for _, s := range l {
			str(s)
		}
		b.WriteByte(']')
	}
	ints := func(l []int32) {
		b.WriteString(strconv.Itoa(len(l)))
		b.WriteByte('[')
		for _, i := range l {
			b.WriteString(strconv.Itoa(int(i)))
			b.WriteByte(',')
		}
		b.WriteByte(']')
	}
	str(c.ListenAddress)
	b.WriteString(strconv.Itoa(int(c.Port)))
	b.WriteByte(',')
	strs(c.ClientCIDRs)
	strs(c.Destinations)
	ints(c.ConnectPorts)
	ints(c.HTTPPorts)
	b.WriteString(strconv.FormatBool(c.DenyPrivateDestinations))
	b.WriteByte(',')
	str(c.HtpasswdPath)
	str(c.PIDFile)
	str(c.CacheLog)
	str(c.AccessLog)
	str(c.CoredumpDir)
	str(c.AuthHelper)
	str(c.HostsFile)
	str(c.AccessLogSyslog)
	b.WriteString(strconv.FormatInt(int64(c.ShutdownLifetime), 10))
	return b.String()
}
