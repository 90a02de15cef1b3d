/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package squid

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"golang.org/x/crypto/bcrypt"
)

const (
	errUserEmpty    = "htpasswd user must not be empty"
	errUserTooLong  = "htpasswd user is longer than 255 bytes"
	errUserChar     = "htpasswd user must not contain ':', whitespace or control characters"
	errPasswdEmpty  = "htpasswd password must not be empty"
	errPasswdLength = "htpasswd password is longer than 72 bytes, which bcrypt cannot hash"
	errHash         = "cannot hash the htpasswd password"

	maxUserLen = 255
)

// Checksum returns the hex SHA-256 of a rendered configuration, for a
// pod-template annotation that rolls the proxy when its configuration
// changes.
func Checksum(conf []byte) string {
	sum := sha256.Sum256(conf)
	return hex.EncodeToString(sum[:])
}

// Htpasswd returns a one-line htpasswd file for user with a bcrypt hash of
// password, in the "$2y$" form `htpasswd -B` writes. The salt is random, so
// two calls differ; use HtpasswdMatches to keep an existing file when the
// password has not changed.
func Htpasswd(user, password string) ([]byte, error) {
	return uncached.Htpasswd(user, password)
}

// HtpasswdMatches reports whether file holds an entry for user whose hash
// matches password. A backend uses it to keep the current file, and so its
// salt and every checksum derived from it, when the password is unchanged.
// It remembers nothing: a backend uses its own Verifier, so a steady-state
// Observe costs no bcrypt comparison.
func HtpasswdMatches(file []byte, user, password string) bool {
	return uncached.HtpasswdMatches(file, user, password)
}

func newHtpasswd(user, password string, cost int) ([]byte, error) {
	if err := checkUser(user); err != nil {
		return nil, err
	}
	switch {
	case password == "":
		return nil, errors.New(errPasswdEmpty)
	case len(password) > 72:
		return nil, errors.New(errPasswdLength)
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), cost)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", errHash, err)
	}
	// Go writes $2a$; $2y$ names the same algorithm and is what Apache's
	// htpasswd and libxcrypt's crypt(3) (used by basic_ncsa_auth) expect.
	h = append([]byte("$2y$"), bytes.TrimPrefix(h, []byte("$2a$"))...)
	return []byte(user + ":" + string(h) + "\n"), nil
}

func checkUser(user string) error {
	switch {
	case user == "":
		return errors.New(errUserEmpty)
	case len(user) > maxUserLen:
		return errors.New(errUserTooLong)
	}
	for i := 0; i < len(user); i++ {
		if c := user[i]; c == ':' || c <= ' ' || c == 0x7f {
			return errors.New(errUserChar)
		}
	}
	return nil
}
