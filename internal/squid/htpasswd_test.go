/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package squid

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHtpasswd(t *testing.T) {
	type want struct {
		line *regexp.Regexp
		err  error
	}
	cases := map[string]struct {
		reason         string
		user, password string
		want           want
	}{
		"Valid": {
			reason:   "A user and password give one htpasswd line with a $2y$ bcrypt hash.",
			user:     "team-a",
			password: "s3cret:with colon",
			want:     want{line: regexp.MustCompile(`^team-a:\$2y\$10\$[./A-Za-z0-9]{53}\n$`)},
		},
		"MaxPassword": {
			reason:   "bcrypt hashes up to 72 bytes.",
			user:     "u",
			password: strings.Repeat("p", 72),
			want:     want{line: regexp.MustCompile(`^u:\$2y\$`)},
		},
		"EmptyUser":      {"A user is required.", "", "p", want{err: errors.New(errUserEmpty)}},
		"UserColon":      {"A ':' would end the user field.", "a:b", "p", want{err: errors.New(errUserChar)}},
		"UserNewline":    {"A newline would add an htpasswd entry.", "a\nroot", "p", want{err: errors.New(errUserChar)}},
		"UserSpace":      {"A space would split the helper's input line.", "a b", "p", want{err: errors.New(errUserChar)}},
		"UserDEL":        {"Control bytes are refused.", "a\x7f", "p", want{err: errors.New(errUserChar)}},
		"UserTooLong":    {"The user is bounded.", strings.Repeat("u", 256), "p", want{err: errors.New(errUserTooLong)}},
		"EmptyPassword":  {"A password is required.", "u", "", want{err: errors.New(errPasswdEmpty)}},
		"PasswordTooBig": {"bcrypt cannot hash more than 72 bytes.", "u", strings.Repeat("p", 73), want{err: errors.New(errPasswdLength)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Htpasswd(tc.user, tc.password)
			if diff := cmp.Diff(tc.want.err, err, equateErrors()); diff != "" {
				t.Fatalf("\n%s\nHtpasswd(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if tc.want.line == nil {
				return
			}
			if !tc.want.line.Match(got) {
				t.Errorf("\n%s\nHtpasswd(...) = %q, want a match of %s", tc.reason, got, tc.want.line)
			}
			if !HtpasswdMatches(got, tc.user, tc.password) {
				t.Errorf("\n%s\nHtpasswdMatches(Htpasswd(u, p), u, p) = false", tc.reason)
			}
		})
	}
}

func TestHtpasswdMatches(t *testing.T) {
	a, err := Htpasswd("team-a", "secret-a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Htpasswd("team-b", "secret-b")
	if err != nil {
		t.Fatal(err)
	}
	// Go's own $2a$ form, as an older file might hold.
	goForm := []byte("team-a:$2a$" + strings.TrimPrefix(strings.SplitN(strings.TrimSpace(string(a)), ":", 2)[1], "$2y$"))
	both := append(append([]byte("# a comment\n\n"), b...), a...)

	cases := map[string]struct {
		reason         string
		file           []byte
		user, password string
		want           bool
	}{
		"Match":          {"The password that made the file matches.", a, "team-a", "secret-a", true},
		"WrongPassword":  {"Another password does not.", a, "team-a", "secret-b", false},
		"OtherUser":      {"A user missing from the file does not.", a, "team-b", "secret-a", false},
		"SecondLine":     {"Any line of a multi-user file matches its user.", both, "team-a", "secret-a", true},
		"CrossedUsers":   {"One user's password does not open another's entry.", both, "team-b", "secret-a", false},
		"GoPrefix":       {"A $2a$ hash of the same password matches.", goForm, "team-a", "secret-a", true},
		"EmptyFile":      {"An empty file matches nothing.", nil, "team-a", "secret-a", false},
		"Garbage":        {"A line that is no entry matches nothing.", []byte("team-a\nteam-a:notahash\n"), "team-a", "secret-a", false},
		"EmptyPassword":  {"An empty password never matches.", a, "team-a", "", false},
		"InvalidUser":    {"An invalid user never matches.", a, "team-a\n", "secret-a", false},
		"CaseSensitive":  {"User names are case sensitive, as squid is configured.", a, "Team-A", "secret-a", false},
		"PrefixUserName": {"A user whose name prefixes another's does not match it.", a, "team", "secret-a", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := HtpasswdMatches(tc.file, tc.user, tc.password); got != tc.want {
				t.Errorf("\n%s\nHtpasswdMatches(...) = %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}

func TestChecksum(t *testing.T) {
	cases := map[string]struct {
		reason string
		conf   []byte
		want   string
	}{
		"Empty": {"The SHA-256 of nothing.", nil, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		"ABC":   {"The SHA-256 test vector for abc.", []byte("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Checksum(tc.conf)); diff != "" {
				t.Errorf("\n%s\nChecksum(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
