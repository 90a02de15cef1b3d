/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Command pie releases its pages, built position-independent by
// TestReleasePositionIndependent, then runs code that reads relocated
// pointers: type descriptors (reflect, fmt, encoding/json) and a garbage
// collection. It prints ok if that gave what it gave before the release.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"runtime"

	"github.com/egressproxy/provider-egressproxy/internal/exepages"
)

type doc struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

func work() string {
	b, _ := json.Marshal(doc{Name: "proxy", Labels: map[string]string{"k": "v"}})
	var d doc
	_ = json.Unmarshal(b, &d)
	runtime.GC()
	return fmt.Sprint(reflect.TypeOf(d).Field(1).Type, d)
}

func main() {
	before := work()
	if _, err := exepages.Release(); err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	if after := work(); after != before {
		fmt.Println(before, "became", after)
		os.Exit(3)
	}
	fmt.Println("ok")
}
