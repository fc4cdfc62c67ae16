#!/usr/bin/env bash
# Builds Harmony's discovery image: a Debian kernel (vmlinuz) and an initramfs (initrd.img) that
# brings up every NIC with DHCP and runs harmony-discovery-agent, which reports the machine's
# hardware to the URL given on the kernel command line (harmony.discovery=URL).
#
# Usage: discovery-image/build.sh OUT_DIR [AGENT_BINARY]
#   OUT_DIR       where vmlinuz and initrd.img are written (created if missing)
#   AGENT_BINARY  the harmony-discovery-agent binary to pack; default: built here with
#                 `cargo build --release -p harmony_discovery_agent`
# Serve OUT_DIR with the OKD program's --discovery-image OUT_DIR. The last line printed is OUT_DIR.
#
# Debian packages (the kernel matching the linux-image-amd64 metapackage, busybox-static) are
# downloaded with `apt-get download` into $HOME/.cache/harmony/discovery-image (or
# $HARMONY_DISCOVERY_CACHE) and reused; an image already built from the same inputs is kept.
set -euo pipefail

die() { echo "error: $*" >&2; exit 2; }
say() { echo "discovery-image: $*" >&2; }

[[ $# -ge 1 && $# -le 2 ]] || die "usage: $0 OUT_DIR [AGENT_BINARY]"
out="$(realpath -m "$1")"
agent="${2:-}"
here="$(cd "$(dirname "$0")" && pwd)"
cache="${HARMONY_DISCOVERY_CACHE:-$HOME/.cache/harmony/discovery-image}"

for tool in apt-get apt-cache dpkg-deb ldd gzip strip; do
    command -v "$tool" >/dev/null || die "$tool not found; this script needs a Debian or Ubuntu machine (apt-get install apt dpkg libc-bin gzip binutils)"
done
if command -v cpio >/dev/null; then
    pack() { cpio --quiet -o -H newc; }
elif command -v busybox >/dev/null; then
    pack() { busybox cpio -o -H newc; }
else
    die "cpio not found; apt-get install cpio"
fi

if [[ -z "$agent" ]]; then
    command -v cargo >/dev/null || die "no AGENT_BINARY given and cargo not found; build harmony-discovery-agent and pass its path"
    say "building harmony-discovery-agent (cargo build --release -p harmony_discovery_agent)"
    (cd "$here/.." && cargo build --release --locked -p harmony_discovery_agent --bin harmony-discovery-agent >&2)
    agent="$(cd "$here/.." && cargo metadata --format-version 1 --no-deps | sed -E 's/.*"target_directory":"([^"]+)".*/\1/')/release/harmony-discovery-agent"
fi
[[ -x "$agent" ]] || die "agent binary $agent is missing or not executable; build it with cargo build -p harmony_discovery_agent"

# The kernel package the metapackage points to, e.g. linux-image-6.1.0-26-amd64.
kernel_pkg="$(apt-cache depends linux-image-amd64 2>/dev/null | sed -nE 's/^ *Depends: (linux-image-[0-9][^ ]*-amd64)$/\1/p' | head -n 1)"
[[ -n "$kernel_pkg" ]] || die "apt-cache knows no linux-image-amd64; run apt-get update (Debian's main archive must be in the sources)"
kver="${kernel_pkg#linux-image-}"

mkdir -p "$cache/debs" "$out"
fetch() {
    local pkg="$1" deb
    deb="$(ls "$cache/debs/${pkg}_"*.deb 2>/dev/null | head -n 1 || true)"
    if [[ -z "$deb" ]]; then
        say "downloading $pkg"
        # apt-get download writes into the current folder; as root it warns that the _apt user
        # cannot write there, which is harmless.
        (cd "$cache/debs" && apt-get download "$pkg" >&2) || die "apt-get download $pkg failed; run apt-get update and check the network"
        deb="$(ls "$cache/debs/${pkg}_"*.deb | head -n 1)"
    fi
    echo "$deb"
}
kernel_deb="$(fetch "$kernel_pkg")"
busybox_deb="$(fetch busybox-static)"

# Rebuild only when an input changed: the packages, the agent, this script, the init script.
stamp="$( (sha256sum "$kernel_deb" "$busybox_deb" "$agent" "$0" "$here/init" "$here/udhcpc.script" | cut -d' ' -f1) | sha256sum | cut -d' ' -f1)"
if [[ -f "$out/vmlinuz" && -f "$out/initrd.img" && "$(cat "$out/.harmony-stamp" 2>/dev/null)" == "$stamp" ]]; then
    say "up to date: $out (kernel $kver)"
    echo "$out"
    exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
say "unpacking $(basename "$kernel_deb") and $(basename "$busybox_deb")"
dpkg-deb -x "$kernel_deb" "$work/kernel"
dpkg-deb -x "$busybox_deb" "$work/busybox"
[[ -f "$work/kernel/boot/vmlinuz-$kver" ]] || die "$kernel_deb has no /boot/vmlinuz-$kver"

root="$work/root"
mkdir -p "$root"/{bin,sbin,etc,proc,sys,dev,run,tmp,usr/bin,usr/sbin,usr/share/udhcpc,lib/modules}
cp "$work/busybox/bin/busybox" "$root/bin/busybox"
for applet in sh mount umount mkdir cat echo sleep ip ifconfig udhcpc insmod modprobe ls grep sed awk \
    poweroff reboot halt mdev dmesg head tail tr cut seq route uname date hostname wc df free sync; do
    ln -sf busybox "$root/bin/$applet"
done
install -m 0755 "$here/udhcpc.script" "$root/usr/share/udhcpc/default.script"
install -m 0755 "$here/init" "$root/init"

# NIC drivers of QEMU and common servers, the disk drivers (so disks are seen and sized), the
# DMI table reader (memory device sizes) and packet sockets (DHCP), each with its dependencies
# from modules.dep, in load order. Built-in ones need nothing.
moddir="$work/kernel/lib/modules/$kver"
[[ -d "$moddir" ]] || moddir="$work/kernel/usr/lib/modules/$kver"
[[ -d "$moddir" ]] || die "$kernel_deb has no lib/modules/$kver"
wanted=(af_packet dmi-sysfs
    virtio_pci virtio_net virtio_blk virtio_scsi
    e1000 e1000e igb igbvf ixgbe ixgbevf i40e ice tg3 bnx2 bnx2x bnxt_en r8169 mlx4_en mlx5_core
    be2net qede vmxnet3 8139cp 8139too ne2k-pci pcnet32
    sd_mod ahci ata_piix nvme megaraid_sas mpt3sas hpsa smartpqi)
# The package ships no modules.dep (its postinst runs depmod); each module names its own
# dependencies in its .modinfo section (depends=a,b), which is all this needs.
declare -A path_of=()
while IFS= read -r p; do
    n="$(basename "$p")"
    n="${n%%.ko*}"
    path_of[${n//-/_}]="$p"
done < <(cd "$moddir" && find kernel -name '*.ko*')
declare -A seen=()
order=()
depends_of() {
    local f="$moddir/$1"
    case "$f" in
        *.xz) xz -dc "$f" ;;
        *.zst) zstd -qdc "$f" ;;
        *.gz) gzip -dc "$f" ;;
        *) cat "$f" ;;
    esac | tr '\0' '\n' | sed -n '/^depends=/{s///p;q;}' | tr ',' ' '
}
add_module() {
    local name="${1//-/_}" p dep
    [[ -n "${seen[$name]:-}" ]] && return 0
    seen[$name]=1
    p="${path_of[$name]:-}"
    if [[ -z "$p" ]]; then
        grep -qE "/${name//_/[-_]}\.ko$" "$moddir/modules.builtin" 2>/dev/null \
            || say "note: kernel $kver has no module $name (skipped)"
        return 0
    fi
    for dep in $(depends_of "$p"); do
        add_module "$dep"
    done
    order+=("$p")
}
for m in "${wanted[@]}"; do
    add_module "$m"
done
: >"$root/etc/modules-order"
for p in "${order[@]}"; do
    name="$(basename "$p")"
    case "$name" in
        *.ko.xz) xz -dc "$moddir/$p" >"$root/lib/modules/${name%.xz}"; name="${name%.xz}" ;;
        *.ko.zst) zstd -qdc "$moddir/$p" >"$root/lib/modules/${name%.zst}"; name="${name%.zst}" ;;
        *.ko.gz) gzip -dc "$moddir/$p" >"$root/lib/modules/${name%.gz}"; name="${name%.gz}" ;;
        *) cp "$moddir/$p" "$root/lib/modules/$name" ;;
    esac
    echo "$name" >>"$root/etc/modules-order"
done
say "${#order[@]} kernel modules"

# The agent and the shared libraries it links, at the paths the loader looks for them.
install -m 0755 "$agent" "$root/usr/bin/harmony-discovery-agent"
strip "$root/usr/bin/harmony-discovery-agent" 2>/dev/null || true
for lib in $(ldd "$agent" | grep -oE '/[^ ]+'); do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
done
# The agent verifies https:// endpoints against the system roots when asked to use them.
if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
    mkdir -p "$root/etc/ssl/certs"
    cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
fi
echo "$kver" >"$root/etc/harmony-kernel"

cp "$work/kernel/boot/vmlinuz-$kver" "$out/vmlinuz.tmp"
(cd "$root" && find . | LC_ALL=C sort | pack | gzip -9n) >"$out/initrd.img.tmp"
mv "$out/vmlinuz.tmp" "$out/vmlinuz"
mv "$out/initrd.img.tmp" "$out/initrd.img"
echo "$stamp" >"$out/.harmony-stamp"
say "built $out/vmlinuz ($(du -h "$out/vmlinuz" | cut -f1)) and $out/initrd.img ($(du -h "$out/initrd.img" | cut -f1)), kernel $kver"
echo "$out"
