/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package squid

import (
	"reflect"
	"testing"
)

// TestKeyCoversEveryField shows that a change to any field of a Config
// changes its key, so Sums never answers for another configuration.
func TestKeyCoversEveryField(t *testing.T) {
	zero := configKey(Config{})
	typ := reflect.TypeOf(Config{})
	for i := range typ.NumField() {
		var c Config
		f := reflect.ValueOf(&c).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x")
		case reflect.Int32, reflect.Int64:
			f.SetInt(1)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		default:
			t.Fatalf("field %s is a %s: teach key and this test about it", typ.Field(i).Name, f.Kind())
		}
		if configKey(c) == zero {
			t.Errorf("field %s does not change the key", typ.Field(i).Name)
		}
	}
}

// TestKeyUnambiguous shows that lists and strings are delimited: moving a
// value from one field or element to the next changes the key.
func TestKeyUnambiguous(t *testing.T) {
	pairs := map[string][2]Config{
		"ElementToNextList": {
			{ClientCIDRs: []string{"a", "b"}},
			{ClientCIDRs: []string{"a"}, Destinations: []string{"b"}},
		},
		"SplitElement": {
			{Destinations: []string{"a,b"}},
			{Destinations: []string{"a", "b"}},
		},
		"PortToNextList": {
			{ConnectPorts: []int32{443}},
			{HTTPPorts: []int32{443}},
		},
		"QuoteInString": {
			{PIDFile: `a","b`},
			{PIDFile: "a", CacheLog: "b"},
		},
	}
	for name, p := range pairs {
		if configKey(p[0]) == configKey(p[1]) {
			t.Errorf("%s: two Configs have the key %s", name, configKey(p[0]))
		}
	}
}

// TestSums shows that Sums answers what rendering answers, and renders a
// Config only once.
func TestSums(t *testing.T) {
	c := Config{Port: 3128, ClientCIDRs: []string{"10.0.0.0/8"}, Destinations: []string{".example.com"}, ConnectPorts: []int32{443}}
	conf, err := Render(c)
	if err != nil {
		t.Fatal(err)
	}
	var s Sums
	for range 2 {
		got, err := s.Sum(c)
		if err != nil || got != Checksum(conf) {
			t.Errorf("Sum: %q, %v; want %q", got, err, Checksum(conf))
		}
	}
	if len(s.sums) != 1 {
		t.Errorf("Sums holds %d checksums of one Config, want 1", len(s.sums))
	}
	if got := ChecksumString(string(conf)); got != Checksum(conf) {
		t.Errorf("ChecksumString: %q, want %q", got, Checksum(conf))
	}
	if _, err := s.Sum(Config{Port: 3128, ClientCIDRs: []string{"not a CIDR"}}); err == nil {
		t.Error("Sum of a Config that does not render: no error")
	}
	if len(s.sums) != 1 {
		t.Errorf("Sums remembered a Config that does not render: %d held, want 1", len(s.sums))
	}
}

func BenchmarkSum(b *testing.B) {
	c := Config{Port: 3128, ClientCIDRs: []string{"10.0.0.0/8", "192.168.0.0/16"}, Destinations: []string{".example.com", "api.example.org", "10.1.2.3"}, ConnectPorts: []int32{443}, HTTPPorts: []int32{80}, DenyPrivateDestinations: true}
	b.Run("Render", func(b *testing.B) {
		for b.Loop() {
			conf, _ := Render(c)
			_ = Checksum(conf)
		}
	})
	b.Run("Sums", func(b *testing.B) {
		var s Sums
		for b.Loop() {
			_, _ = s.Sum(c)
		}
	})
}
