#!/usr/bin/env bash
# Installs the Debian packages the tests run for real (squid, cloud-init, a
# private libvirtd with QEMU/TCG). Idempotent: it only calls apt for what is
# missing, so a warm machine pays nothing.
#
#   hack/deps.sh [squid] [cloud-init] [nftables] [libvirt] [guest-image] [node] [sshd]   (no argument: all of them)
set -euo pipefail

declare -A groups=(
  [squid]="squid"
  [cloud-init]="cloud-init"
  [nftables]="nftables"
  # libvirt-daemon-config-nwfilter: the stock network filters (clean-traffic)
  # every proxy VM's NIC references; the sandbox copies them.
  [libvirt]="libvirt-daemon libvirt-daemon-driver-qemu libvirt-daemon-config-nwfilter libvirt-clients qemu-system-x86 qemu-utils dnsmasq-base iptables"
  # hack/guest-image.sh: bootstrap, file systems and a BIOS boot loader built
  # into plain files, no mounts or loop devices.
  [guest-image]="mmdebstrap debian-archive-keyring e2fsprogs dosfstools mtools syslinux syslinux-common fdisk qemu-utils"
  # A real Kubernetes node (internal/testenv/node) and its images
  # (hack/squid-image.sh): kubelet and kube-proxy come from hack/tools.sh;
  # kube-proxy writes its rules with iptables (conntrack entries it clears
  # through netlink, no conntrack tool).
  [node]="containerd runc containernetworking-plugins mmdebstrap debian-archive-keyring jq iptables"
  # OpenSSH's sshd on the private libvirtd's host (internal/testenv/cluster,
  # sshd.go): the provider's pods reach libvirt over qemu+ssh. The tests
  # run it with a config of their own; the system's ssh service is kept
  # from starting (below).
  [sshd]="openssh-server"
)

want=("$@")
[ ${#want[@]} -eq 0 ] && want=(squid cloud-init nftables libvirt guest-image node sshd)

missing=()
for g in "${want[@]}"; do
  for p in ${groups[$g]:?unknown group $g}; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
done

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "hack/deps.sh: need root to install: ${missing[*]}" >&2
    exit 1
  fi
  echo "[deps] installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  # Only refresh the package lists when they are missing or older than a day.
  if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mmin -1440 2>/dev/null | head -1)" ]; then
    apt-get update -qq >&2
  fi
  # Installing openssh-server would start (and, under systemd, enable at
  # boot) the system's sshd on port 22. Debian's ssh service does not start
  # while this file exists (its unit's ConditionPathExists, its init
  # script's check_for_no_start); a machine that had the package keeps its
  # own choice, as this runs only when the package is missing.
  if [[ " ${missing[*]} " == *" openssh-server "* ]] && [ ! -e /etc/ssh/sshd_config ]; then
    mkdir -p /etc/ssh
    touch /etc/ssh/sshd_not_to_be_run
  fi
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# libvirtd refuses to start without this user, even when QEMU runs as root.
for g in "${want[@]}"; do
  if [ "$g" = libvirt ] && ! id libvirt-qemu >/dev/null 2>&1; then
    groupadd -r libvirt-qemu 2>/dev/null || true
    useradd -r -g libvirt-qemu -s /usr/sbin/nologin libvirt-qemu
  fi
done
