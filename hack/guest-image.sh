#!/usr/bin/env bash
# Builds the KVM proxy's guest image: a BIOS-bootable Debian bookworm qcow2
# with cloud-init (NoCloud), squid and the QEMU guest agent preinstalled, so a
# KVMProxy's seed only writes configuration and a VM without a mirror still
# serves. Offline apart from the Debian mirror apt already uses; the disk is
# assembled without mounts or loop devices (mkfs -d, mtools, sfdisk on plain
# files). Needs root and `hack/deps.sh guest-image`.
#
#   hack/guest-image.sh [build]   build unless cached; print the image's path
#   hack/guest-image.sh path      print the path if built, else exit 1
#
# The image is cached under ${XDG_CACHE_HOME:-$HOME/.cache}/provider-egressproxy/images,
# keyed by a hash of this script (which holds the package list). MIRROR and
# SECURITY_MIRROR override the mirrors read from apt's sources.
set -euo pipefail

# What the guest runs. squid is installed but disabled: the seed's runcmd
# enables and starts it once cloud-init has written the rendered squid.conf,
# so the VM never serves Debian's stock configuration. nftables loads the GCE
# startup script's metadata guard (it would install it, without a mirror).
PACKAGES=(
  linux-image-cloud-amd64 systemd-sysv udev dbus kmod iproute2 netbase
  systemd-resolved cloud-init cloud-guest-utils squid qemu-guest-agent nftables
)
SUITE=bookworm
DISK_MIB=2048 # virtual size; cloud-init grows the root partition to the overlay's
BOOT_MIB=63   # FAT partition with syslinux, the kernel and the initrd
# Fixed identifiers: the kernel command line and fstab name the root partition.
ROOT_PARTUUID=6c1a0e2b-7f3d-4e55-9a31-0e9f2d5b8c41
ROOT_FSUUID=0b3f1c9e-52a4-4d1e-8e7b-3c9a6f2d1e07

cache=${XDG_CACHE_HOME:-$HOME/.cache}/provider-egressproxy/images
key=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)
image=$cache/debian-12-egressproxy-$key.qcow2

case ${1:-build} in
  path) [ -f "$image" ] && echo "$image" && exit 0; exit 1 ;;
  build) ;;
  *) echo "usage: $0 [build|path]" >&2; exit 2 ;;
esac

if [ -f "$image" ]; then echo "$image"; exit 0; fi
if [ "$(id -u)" != 0 ]; then
  echo "hack/guest-image.sh: building the image needs root (mmdebstrap --mode=root)" >&2
  exit 1
fi

# shellcheck source=hack/lib/apt-mirror.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/apt-mirror.sh"
main=${MIRROR:-$(mirror "$SUITE" | head -1)}
security=${SECURITY_MIRROR:-$(mirror "$SUITE-security" | head -1)}
if [ -z "$main" ]; then
  echo "hack/guest-image.sh: no apt source for $SUITE found; set MIRROR" >&2
  exit 1
fi
sources=("deb $main $SUITE main" "deb $main $SUITE-updates main")
[ -n "$security" ] && sources+=("deb $security $SUITE-security main")

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9 # make test and make dev may build at the same time
if [ -f "$image" ]; then echo "$image"; exit 0; fi

work=$(mktemp -d "$cache/.build-XXXXXX")
# --one-file-system: should the bootstrap die with /proc or /dev still
# mounted in the root, the cleanup must not descend into them.
trap 'rm -rf --one-file-system "$work"' EXIT
root=$work/root
start=$SECONDS
echo "[guest-image] bootstrapping $SUITE from $main" >&2

# Respect the host's apt settings that matter for reaching its mirror (a
# snapshot mirror needs Check-Valid-Until off).
aptopts=()
for o in Acquire::Check-Valid-Until Acquire::Check-Date Acquire::http::Proxy; do
  v=$(apt-config dump "$o" | sed -n "s/^$o \"\(.*\)\";$/\1/p" | head -1)
  [ -n "$v" ] && aptopts+=(--aptopt="$o \"$v\"")
done

# A small initramfs, generated once when the kernel is installed: only the
# drivers of a virtio disk and the root file system (a hook, because
# /etc/initramfs-tools/modules is a conffile of the package).
mkdir -p "$work/initramfs-tools/conf.d" "$work/initramfs-tools/hooks"
echo MODULES=list >"$work/initramfs-tools/conf.d/egressproxy.conf"
cat >"$work/initramfs-tools/hooks/egressproxy" <<'HOOK'
#!/bin/sh
[ "$1" = prereqs ] && exit 0
. /usr/share/initramfs-tools/hook-functions
for m in virtio_pci virtio_blk virtio_scsi sd_mod ext4; do manual_add_modules "$m"; done
HOOK
chmod +x "$work/initramfs-tools/hooks/egressproxy"

mmdebstrap --quiet --variant=minbase --mode=root --format=directory \
  --include="$(IFS=,; echo "${PACKAGES[*]}")" \
  --essential-hook="cp -a '$work/initramfs-tools' \"\$1/etc/\"" \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  "${aptopts[@]}" \
  "$SUITE" "$root" "${sources[@]}" >&2

# --- the guest's configuration, written as files ---
cat >"$root/etc/fstab" <<EOF
PARTUUID=$ROOT_PARTUUID / ext4 defaults,errors=remount-ro 0 1
EOF
echo localhost >"$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
# Every VM gets its own machine-id (and DHCP client id) at first boot.
: >"$root/etc/machine-id"
rm -f "$root/var/lib/dbus/machine-id"
# The bootstrap copied the host's resolver; the guest uses resolved, which
# takes the DNS servers DHCP hands out.
ln -sf ../run/systemd/resolve/stub-resolv.conf "$root/etc/resolv.conf"

# Network: DHCP on eth0 (net.ifnames=0) by systemd-networkd. cloud-init's
# own network rendering is off: bookworm's cloud-init has no renderer that
# needs nothing else, and the seed only ever asks for DHCP on this NIC.
mkdir -p "$root/etc/systemd/network"
cat >"$root/etc/systemd/network/10-eth0.network" <<'EOF'
[Match]
Name=eth0

[Network]
DHCP=ipv4
EOF

cat >"$root/etc/cloud/cloud.cfg.d/90-egressproxy.cfg" <<'EOF'
# A KVMProxy seeds the VM with a NoCloud ISO (label cidata).
datasource_list: [ NoCloud, None ]
network: {config: disabled}
# No sshd and no login user: the VM is managed through its seed only.
ssh_genkeytypes: []
users: []
# Nothing to do for modules that fail or waste time here: C.UTF-8 is the only
# locale (no locales package), and there is no GRUB.
locale: "false"
grub_dpkg: {enabled: false}
EOF

systemctl --root="$root" enable systemd-networkd.service systemd-resolved.service >&2
systemctl --root="$root" disable squid.service >&2
# systemd runs squid; without the SysV script, the seed's `systemctl enable
# squid` skips update-rc.d, which took most of a minute under TCG.
rm -f "$root/etc/init.d/squid"
# Nothing runs that needs a mirror or waits for one: the VM may have none.
systemctl --root="$root" mask apt-daily.timer apt-daily-upgrade.timer \
  e2scrub_all.timer e2scrub_reap.service fstrim.timer \
  systemd-networkd-wait-online.service >&2

kernel=$(find "$root/boot" -maxdepth 1 -name 'vmlinuz-*' | sort -V | tail -1)
initrd=$(find "$root/boot" -maxdepth 1 -name 'initrd.img-*' | sort -V | tail -1)

# --- the disk: GPT, a FAT boot partition with syslinux, an ext4 root ---
echo "[guest-image] assembling the disk" >&2
boot=$work/boot.img rootimg=$work/root.img disk=$work/disk.raw
boot_start=2048                              # sectors (1 MiB)
root_start=$(( (1 + BOOT_MIB) * 2048 ))
root_mib=$(( DISK_MIB - 1 - BOOT_MIB - 1 ))  # leave 1 MiB for the backup GPT

# -h: hidden sectors, the partition's offset, which the boot sector needs.
mkfs.vfat -n BOOT -h "$boot_start" -C "$boot" $(( BOOT_MIB * 1024 )) >&2
cat >"$work/syslinux.cfg" <<EOF
SERIAL 0 115200
DEFAULT linux
PROMPT 0
TIMEOUT 0
LABEL linux
  KERNEL /vmlinuz
  INITRD /initrd.img
  APPEND root=PARTUUID=$ROOT_PARTUUID ro console=ttyS0,115200 net.ifnames=0 quiet
EOF
mcopy -i "$boot" "$kernel" ::/vmlinuz
mcopy -i "$boot" "$initrd" ::/initrd.img
mcopy -i "$boot" "$work/syslinux.cfg" ::/syslinux.cfg
syslinux --install "$boot"

# The kernel and initrd live on the boot partition only.
rm -f "$root"/boot/vmlinuz-* "$root"/boot/initrd.img-*
mkfs.ext4 -q -L root -U "$ROOT_FSUUID" -d "$root" "$rootimg" "${root_mib}M" >&2

truncate -s "${DISK_MIB}M" "$disk"
sfdisk --quiet "$disk" <<EOF
label: gpt
first-lba: 2048
start=$boot_start, size=$(( BOOT_MIB * 2048 )), type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=boot, attrs=LegacyBIOSBootable
start=$root_start, size=$(( root_mib * 2048 )), type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, uuid=$ROOT_PARTUUID, name=root
EOF
dd if="$boot" of="$disk" bs=1M seek=1 conv=notrunc,sparse status=none
dd if="$rootimg" of="$disk" bs=1M seek=$(( 1 + BOOT_MIB )) conv=notrunc,sparse status=none
# syslinux's GPT MBR boots the partition flagged LegacyBIOSBootable.
dd if=/usr/lib/syslinux/mbr/gptmbr.bin of="$disk" bs=440 count=1 conv=notrunc status=none

qemu-img convert -f raw -O qcow2 -c -o compression_type=zstd "$disk" "$work/image.qcow2"
mv "$work/image.qcow2" "$image"
# Only the current image stays cached.
find "$cache" -maxdepth 1 -name 'debian-12-egressproxy-*.qcow2' ! -path "$image" -delete
echo "[guest-image] built in $(( SECONDS - start ))s: $(du -h "$image" | cut -f1) $image" >&2
echo "$image"
