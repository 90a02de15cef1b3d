/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package testenv

// DevLogWrapper is a shell script that runs a program in a private mount
// namespace whose /dev is the folder in EGRESSPROXY_TEST_DEV: the host's
// null, zero, random and urandom, a shm of its own, and whatever else the
// caller put there, such as a log socket of its own. So the program's
// syslog(3) reaches the caller and nothing else, on a host without a
// journal. Run it as root, as
//
//	EGRESSPROXY_TEST_DEV=<folder> EGRESSPROXY_TEST_SQUID=<program> <script> <args>
//
// (the variable is named after squid, its first user).
const DevLogWrapper = `#!/bin/sh
set -e
if [ -z "$EGRESSPROXY_TEST_INNER" ]; then
  EGRESSPROXY_TEST_INNER=1 exec unshare -m --propagation private "$0" "$@"
fi
dev=$EGRESSPROXY_TEST_DEV
for f in null zero random urandom; do
  : >"$dev/$f"
  mount --bind "/dev/$f" "$dev/$f"
done
ln -sfn /proc/self/fd "$dev/fd"
mkdir -p "$dev/shm"
mount -t tmpfs -o mode=1777 tmpfs "$dev/shm"
mount --rbind "$dev" /dev
exec "$EGRESSPROXY_TEST_SQUID" "$@"
`
