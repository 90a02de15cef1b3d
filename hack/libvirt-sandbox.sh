#!/usr/bin/env bash
# Runs a real, private libvirtd for tests and the local dev environment.
#
#   hack/libvirt-sandbox.sh start  BASE   start (or repair) the sandbox; idempotent
#   hack/libvirt-sandbox.sh stop   BASE   destroy its domains, stop it, kill leftovers
#   hack/libvirt-sandbox.sh status BASE   exit 0 running, 3 stopped, 1 half-dead
#   hack/libvirt-sandbox.sh kill   BASE   kill -9 only libvirtd, if running (crash
#                                         tests): VMs and networks keep running, and
#                                         the next `start` brings a daemon back that
#                                         reattaches to them
#
# Clients use qemu+unix:///system?socket=BASE/run/libvirt-sock (or
# test+unix:///default?socket=...). Exit code 2 means this machine cannot run
# the sandbox (not root, no namespaces, packages missing), so tests skip.
#
# Layout: a "holder" bash is PID 1 of new pid+mount+net namespaces. It owns a
# tmpfs on /run and bind mounts of BASE/{etc,lib,cache,log} over the libvirt
# directories, and it reaps orphans: qemu and dnsmasq daemonize, and the
# host's PID 1 here never reaps, so without it every destroyed VM would stay a
# zombie. libvirtd runs inside via nsenter, so it can be killed and restarted
# while VMs and the NAT network live on. Killing the holder makes the kernel
# kill everything left in the pid namespace. Bridges, dnsmasq and iptables
# rules exist only in the private network namespace; the host's /run/libvirt,
# network and firewall are never touched. One `unshare` zombie per
# start/stop cycle remains on hosts whose PID 1 does not reap.
#
# LIBVIRT_SANDBOX_CACHE=DIR shares the QEMU capabilities cache between
# sandboxes (a fresh cache costs a ~4 s QEMU probe on the first DefineXML);
# the default, BASE/cache, keeps it when BASE is reused.
#
# The helpers avoid forks: on a loaded 2-core machine each costs ~45 ms.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

usage() { sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 64; }
die() { echo "libvirt-sandbox: $*" >&2; exit 1; }
missing() { echo "libvirt-sandbox: $*" >&2; exit 2; }
log_tail() { tail -n 20 "$base/log/sandbox.log" "$base/log/libvirtd.log" >&2 2>/dev/null || true; }

[ $# -eq 2 ] || usage
cmd=$1
base=$(realpath -m -- "$2")
sock=$base/run/libvirt-sock
uri="qemu+unix:///system?socket=$sock"

# Paths go into config files unquoted, and the holder hides /run.
[[ $base =~ ^[A-Za-z0-9/._-]+$ ]] || die "BASE must match [A-Za-z0-9/._-]+: $base"
case $base in /run | /run/* | /var/run/* | /proc/* | /sys/* | /etc/libvirt* | /var/lib/libvirt* | /var/cache/libvirt* | /var/log/libvirt*)
  die "BASE must not be under a directory the sandbox mounts over: $base" ;;
esac
# sun_path holds 108 bytes including the NUL.
[ ${#sock} -le 107 ] || die "socket path too long for a unix socket (${#sock} > 107 bytes): $sock"

# proc_stat PID sets STATE and START (start time, which tells a reused PID
# apart); it fails when PID is gone.
proc_stat() {
  local line rest
  read -r line 2>/dev/null <"/proc/$1/stat" || return 1
  rest=${line##*) }
  read -r STATE _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ START _ <<<"$rest"
}

# alive PID: a zombie counts as dead, since nothing may ever reap it.
alive() { proc_stat "$1" && [[ $STATE != [ZX] ]]; }

# find_holder sets H to the holder's PID if it is alive and still ours.
find_holder() {
  local p s
  H=
  read -r p s 2>/dev/null <"$base/holder.pid" || return 0
  if alive "$p" && [ "$START" = "$s" ]; then H=$p; fi
}

# find_daemon sets D to libvirtd's host PID: a child of the holder (libvirtd
# daemonized, so the pid namespace's init adopted it).
find_daemon() {
  local c comm kids
  D=
  find_holder
  [ -n "$H" ] || return 0
  # The file ends without a newline, so read "fails" at EOF.
  read -r kids 2>/dev/null <"/proc/$H/task/$H/children" || true
  for c in $kids; do
    read -r comm 2>/dev/null <"/proc/$c/comm" || continue
    if [ "$comm" = libvirtd ] && alive "$c"; then
      D=$c
      return 0
    fi
  done
}

# members lists the live PIDs in the sandbox's pid or network namespace.
# Namespace inode numbers are recycled as soon as a namespace is freed (the
# kernel hands out the lowest free one), so BASE/ns names this sandbox only
# while its holder lives: once the holder is dead the same numbers may belong
# to another sandbox started meanwhile, whose processes must not be killed.
members() {
  local pidns netns p hpid
  read -r pidns netns 2>/dev/null <"$base/ns" || return 0
  find_holder
  [ -n "$H" ] || return 0
  hpid=$(stat -L -c %i "/proc/$H/ns/pid" 2>/dev/null) || return 0
  [ "$hpid" = "$pidns" ] || return 0
  {
    # stat fails for processes that exit meanwhile; the rest is still printed.
    stat -L -c '%n %i' /proc/[0-9]*/ns/pid 2>/dev/null || true
    stat -L -c '%n %i' /proc/[0-9]*/ns/net 2>/dev/null || true
  } | awk -v p="$pidns" -v n="$netns" '$2 == p || $2 == n { split($1, a, "/"); print a[3] }' |
    sort -un | while read -r p; do
    if alive "$p"; then echo "$p"; fi
  done
}

# in_netns PID NETNS: PID is alive and still in the network namespace NETNS.
# A live process pins its namespace, so the number cannot have been recycled.
in_netns() {
  local n
  n=$(stat -L -c %i "/proc/$1/ns/net" 2>/dev/null) || return 1
  [ "$n" = "$2" ] && alive "$1"
}

# wait_gone SECONDS PID...: true once every PID is dead or a zombie.
wait_gone() {
  local deadline=$((SECONDS + $1)) p left
  shift
  while :; do
    left=
    for p in "$@"; do if alive "$p"; then left=1; fi; done
    [ -z "$left" ] && return 0
    [ $SECONDS -ge $deadline ] && return 1
    sleep 0.1
  done
}

answers() { timeout 5 virsh -q -c "$uri" uri >/dev/null 2>&1; }

# have_deps [-v]: true when every program the sandbox runs is installed.
have_deps() {
  local p ok=0
  for p in unshare nsenter setsid libvirtd virsh ip qemu-img qemu-system-x86_64 dnsmasq iptables; do
    if ! command -v "$p" >/dev/null; then
      ok=1
      [ "${1:-}" = -v ] && echo -n "$p "
    fi
  done
  if ! id libvirt-qemu >/dev/null 2>&1; then
    ok=1
    [ "${1:-}" = -v ] && echo -n "user:libvirt-qemu "
  fi
  if [ ! -f /etc/libvirt/nwfilter/clean-traffic.xml ]; then
    ok=1
    [ "${1:-}" = -v ] && echo -n "nwfilter:clean-traffic"
  fi
  return $ok
}

write_config() {
  cat >"$base/etc/libvirtd.conf" <<EOF
# Written by hack/libvirt-sandbox.sh on every start.
unix_sock_dir = "$base/run"
unix_sock_rw_perms = "0770"
auth_unix_ro = "none"
auth_unix_rw = "none"
log_outputs = "3:file:$base/log/libvirtd.log"
EOF
  # The stock network filters (Debian's libvirt-daemon-config-nwfilter):
  # the backend puts clean-traffic on every NIC, and the sandbox's
  # /etc/libvirt is $base/etc, where the host's are not seen.
  mkdir -p "$base/etc/nwfilter"
  cp /etc/libvirt/nwfilter/*.xml "$base/etc/nwfilter/"
  # Root QEMU without a security driver: as libvirt-qemu every DefineXML
  # re-probed QEMU (~64 s). No cgroups and no per-VM /dev namespace, since
  # the sandbox shares the host's cgroup tree.
  cat >"$base/etc/qemu.conf" <<EOF
# Written by hack/libvirt-sandbox.sh on every start.
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
stdio_handler = "file"
cgroup_controllers = [ ]
namespaces = [ ]
EOF
  # PID 1 of the sandbox: sets up the mounts, then reaps orphans until it is
  # killed (only SIGKILL from the host reaches a namespace's init).
  cat >"$base/holder.sh" <<'EOF'
set -eu
base=$1 cache=$2
mount -t tmpfs -o mode=0755,size=64m libvirt-sandbox /run
mkdir -p /run/libvirt /run/lock
mount --bind "$base/etc" /etc/libvirt
mount --bind "$base/lib" /var/lib/libvirt
mount --bind "$cache" /var/cache/libvirt
mount --bind "$base/log" /var/log/libvirt
# A sysfs of this netns: the host's lists the host's NICs, which libvirt
# then fails to query (ethtool errors), and lacks the sandbox's bridges.
mount -t sysfs sysfs /sys
ip link set lo up
: >"$base/run/ns-ready"
trap : CHLD
sleep infinity & s=$!
while :; do
  wait || true
  kill -0 "$s" 2>/dev/null || { sleep infinity & s=$!; }
done
EOF
}

start_holder() {
  local cache=${LIBVIRT_SANDBOX_CACHE:-$base/cache} u kids deadline=$((SECONDS + 10))
  mkdir -p "$cache"
  # Mount points only; on the host they stay empty.
  mkdir -p /etc/libvirt /var/lib/libvirt /var/cache/libvirt /var/log/libvirt
  rm -f "$base/run/ns-ready" "$base/holder.pid" "$base/libvirtd.pid" "$base/ns"
  setsid unshare --fork --pid --mount-proc --mount --net --propagation private \
    bash "$base/holder.sh" "$base" "$cache" </dev/null >>"$base/log/sandbox.log" 2>&1 &
  u=$!
  until [ -e "$base/run/ns-ready" ]; do
    if ! alive "$u" || [ $SECONDS -ge $deadline ]; then
      kill -9 "$u" 2>/dev/null || true
      log_tail
      missing "cannot create the private namespaces (unshare needs CAP_SYS_ADMIN)"
    fi
    sleep 0.05
  done
  kids=
  read -r kids 2>/dev/null <"/proc/$u/task/$u/children" || true
  H=${kids%% *}
  [ -n "$H" ] || { log_tail; die "the namespace init exited right after it started; see $base/log/sandbox.log"; }
  proc_stat "$H" || die "the namespace init died at once; see $base/log/sandbox.log"
  echo "$H $START" >"$base/holder.pid"
  echo "$(stat -L -c %i "/proc/$H/ns/pid") $(stat -L -c %i "/proc/$H/ns/net")" >"$base/ns"
}

start_daemon() {
  local deadline=$((SECONDS + 20))
  rm -f "$base"/run/libvirt-sock "$base"/run/libvirt-sock-ro "$base"/run/libvirt-admin-sock "$base/libvirtd.pid"
  # --daemon returns once libvirtd forked; the daemon's parent becomes the holder.
  if ! nsenter --target "$H" --mount --net --pid -- \
    libvirtd --daemon --config "$base/etc/libvirtd.conf" --pid-file /run/libvirt/libvirtd.pid \
    >>"$base/log/sandbox.log" 2>&1; then
    log_tail
    die "libvirtd failed to start"
  fi
  until [ -S "$sock" ] && answers; do
    find_daemon
    if [ -z "$D" ] || [ $SECONDS -ge $deadline ]; then
      log_tail
      die "libvirtd did not answer on $sock within 20 s"
    fi
    sleep 0.05
  done
}

start() {
  [ "$EUID" = 0 ] || missing "needs root (namespaces, bridges, iptables)"
  # deps.sh spends ~1.5 s in dpkg-query even when all is there; only call it
  # when something is missing.
  if ! have_deps; then
    "$here/deps.sh" libvirt >&2 || missing "hack/deps.sh libvirt failed"
    have_deps || missing "still missing after hack/deps.sh libvirt: $(have_deps -v)"
  fi
  mkdir -p "$base"/{etc,lib,cache,log,run}
  write_config
  find_holder
  if [ -z "$H" ]; then
    # A holder killed by hand took its pid namespace with it; what lived
    # only in its network namespace can no longer be told apart from another
    # sandbox's (see members), so it is left alone.
    start_holder
  fi
  find_daemon
  [ -n "$D" ] || start_daemon
  find_daemon
  [ -n "$D" ] || die "libvirtd answers but is not a child of the holder $H"
  echo "$D" >"$base/libvirtd.pid"
  echo "libvirt-sandbox: running, pid $D, $uri" >&2
}

kill_members() {
  local pids p left= pidns netns
  # The list is taken while the holder lives, which proves the namespace
  # numbers in BASE/ns are still this sandbox's (see members).
  pids=$(members)
  read -r pidns netns 2>/dev/null <"$base/ns" || true
  # PID 1 of the pid namespace first: the kernel then kills the rest, and its
  # unshare parent reaps it (a sibling killed at the same time would not).
  find_holder
  if [ -n "$H" ]; then
    kill -9 "$H" 2>/dev/null || true
    wait_gone 5 "$H" || true
  fi
  # What is left lives only in the network namespace (entered with nsenter
  # --net from the host); each such process still pins that namespace.
  for p in $pids; do
    if in_netns "$p" "${netns:--}"; then left="$left $p"; fi
  done
  [ -n "$left" ] || return 0
  # shellcheck disable=SC2086
  kill -9 $left 2>/dev/null || true
  # shellcheck disable=SC2086
  wait_gone 5 $left || echo "libvirt-sandbox: still alive after kill -9:$left" >&2
}

stop() {
  local pids name unshare=
  find_daemon
  if [ -n "$D" ] && answers; then
    # Domains outlive the daemon, so let libvirt destroy them while it can.
    for name in $(timeout 10 virsh -q -c "$uri" list --name 2>/dev/null || true); do
      timeout 15 virsh -q -c "$uri" destroy "$name" >/dev/null 2>&1 || echo "libvirt-sandbox: cannot destroy $name" >&2
    done
  fi
  if [ -n "$D" ]; then
    kill -TERM "$D" 2>/dev/null || true
    wait_gone 10 "$D" || echo "libvirt-sandbox: libvirtd ignored SIGTERM for 10 s" >&2
  fi
  # dnsmasq, stray qemu: all but the holder and its unshare parent (which
  # ignores SIGTERM) get a chance to exit.
  if [ -n "$H" ] && proc_stat "$H"; then read -r _ _ _ unshare _ 2>/dev/null <"/proc/$H/stat" || true; fi
  pids=$(members | grep -vx -e "${H:--}" -e "${unshare:--}" || true)
  if [ -n "$pids" ]; then
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null || true
    # shellcheck disable=SC2086
    wait_gone 5 $pids || true
  fi
  kill_members
  rm -f "$base"/{holder.pid,libvirtd.pid,ns} "$base"/run/{libvirt-sock,libvirt-sock-ro,libvirt-admin-sock,ns-ready}
  echo "libvirt-sandbox: stopped" >&2
}

status() {
  find_daemon
  if [ -n "$D" ] && answers; then
    echo "running: libvirtd pid $D, namespace init pid $H, $uri"
    return 0
  fi
  local left
  left=$(members | tr '\n' ' ')
  if [ -z "$H" ] && [ -z "$left" ]; then
    echo "stopped"
    return 3
  fi
  echo "degraded: namespace init pid ${H:-none}, libvirtd pid ${D:-none}, members: $left"
  return 1
}

crash() {
  find_daemon
  [ -n "$D" ] || return 0
  kill -9 "$D"
  wait_gone 10 "$D" || die "libvirtd $D survived kill -9"
  rm -f "$base/libvirtd.pid"
}

case $cmd in
start) start ;;
stop) stop ;;
status) status ;;
kill) crash ;;
*) usage ;;
esac
