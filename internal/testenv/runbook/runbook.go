/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package runbook reads the shell steps of a Markdown page, so that a test
// can run the commands a page gives readers, as the page gives them.
//
// Every ```sh block of a page is a step and carries a name in an HTML
// comment on the line before its fence, which readers of the rendered page
// do not see:
//
//	<!-- step: install-configuration -->
//	```sh
//	kubectl apply -f - <<EOF
//	...
//	```
//
// A ```sh block without a name is an error: a test that runs a page's
// steps must decide about each one, so a new block cannot go unnoticed.
// Blocks in other languages (yaml, text) are not steps.
package runbook

import (
	"bufio"
	"bytes"
	"regexp"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

const (
	errFmtUnnamed   = "line %d: a sh block without a <!-- step: NAME --> comment on the line before it"
	errFmtDuplicate = "line %d: step %q is named twice"
	errFmtUnclosed  = "line %d: the block of step %q is not closed"
	errFmtStray     = "line %d: step %q names no sh block (the next line is %q)"
	errFmtExport    = "step %q line %d: want export NAME=VALUE, got %q"
)

// A Step is a named sh block of a page.
type Step struct {
	// Name is the step's name from its comment.
	Name string
	// Line is the line of the block's opening fence, from 1.
	Line int
	// Script is the block's text, without the fences.
	Script string
}

var (
	marker = regexp.MustCompile(`^<!--\s*step:\s*([a-z0-9][a-z0-9-]*)\s*-->$`)
	export = regexp.MustCompile(`^export ([A-Z][A-Z0-9_]*)=(.*)$`)
)

// Parse returns the steps of a Markdown page, in the page's order. Every
// sh block must be named.
func Parse(md []byte) ([]Step, error) { return parse(md, true) }

// Named returns the named steps of a page whose other sh blocks a test
// does not run: a page that a test picks single steps from.
func Named(md []byte) ([]Step, error) { return parse(md, false) }

func parse(md []byte, strict bool) ([]Step, error) {
	var (
		steps   []Step
		seen    = map[string]bool{}
		pending string // a step name waiting for its block
		pendAt  int
		in      *Step // the step whose block is open
		fence   bool  // inside another block
		body    []string
	)
	s := bufio.NewScanner(bytes.NewReader(md))
	n := 0
	for s.Scan() {
		n++
		line := s.Text()
		t := strings.TrimSpace(line)
		switch {
		case in != nil:
			if t == "```" {
				in.Script = strings.Join(body, "\n") + "\n"
				steps = append(steps, *in)
				in, body = nil, nil
				continue
			}
			body = append(body, line)
			continue
		case fence:
			if strings.HasPrefix(t, "```") {
				fence = false
			}
			continue
		}
		if m := marker.FindStringSubmatch(t); m != nil {
			if seen[m[1]] {
				return nil, errors.Errorf(errFmtDuplicate, n, m[1])
			}
			seen[m[1]] = true
			pending, pendAt = m[1], n
			continue
		}
		if t == "```sh" {
			if pending == "" && !strict {
				fence = true
				continue
			}
			if pending == "" {
				return nil, errors.Errorf(errFmtUnnamed, n)
			}
			in = &Step{Name: pending, Line: n}
			pending = ""
			continue
		}
		if pending != "" {
			return nil, errors.Errorf(errFmtStray, pendAt, pending, line)
		}
		if strings.HasPrefix(t, "```") {
			fence = true
		}
	}
	if in != nil {
		return nil, errors.Errorf(errFmtUnclosed, in.Line, in.Name)
	}
	if pending != "" {
		return nil, errors.Errorf(errFmtStray, pendAt, pending, "")
	}
	return steps, errors.Wrap(s.Err(), "cannot read the page")
}

// Variables returns the names a step defines with export NAME=VALUE lines,
// in order, and their values as written. Every line of the step must be
// one of them, a comment or blank: a step of variables is where a page
// says what differs per installation, which a test sets to its own values
// instead of running the step.
func Variables(s Step) ([]string, map[string]string, error) {
	var names []string
	vals := map[string]string{}
	for i, line := range strings.Split(strings.TrimRight(s.Script, "\n"), "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if c := strings.Index(t, " #"); c > 0 {
			t = strings.TrimSpace(t[:c])
		}
		m := export.FindStringSubmatch(t)
		if m == nil {
			return nil, nil, errors.Errorf(errFmtExport, s.Name, s.Line+1+i, line)
		}
		names = append(names, m[1])
		vals[m[1]] = m[2]
	}
	return names, vals, nil
}
