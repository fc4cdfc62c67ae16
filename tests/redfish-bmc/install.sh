#!/usr/bin/env bash
# Installs what the emulated-BMC fixture (tests/e2e/src/bmc_lab.rs) needs:
#   - Debian packages libvirt-daemon, libvirt-daemon-driver-qemu, libvirt-clients,
#     python3-libvirt (and qemu-system-x86, ipxe-qemu, python3-venv), only when missing;
#   - the sushy-tools Redfish emulator, pinned below, in a venv at
#     ${HARMONY_REDFISH_BMC_DIR:-$HOME/.cache/harmony/redfish-bmc}/venv. The venv is made by
#     Debian's /usr/bin/python3 with --system-site-packages, so it sees Debian's python3-libvirt
#     (built for that interpreter only; a pyenv python would not find it).
# Idempotent and fast when everything is there (a stamp records the pinned version). Progress
# goes to stderr only.
set -euo pipefail

SUSHY_TOOLS_VERSION="2.2.0"

dir="${HARMONY_REDFISH_BMC_DIR:-$HOME/.cache/harmony/redfish-bmc}"
venv="$dir/venv"
python=/usr/bin/python3

installer=redfish-bmc
# shellcheck source=../install-common.sh
source "$(dirname "$0")/../install-common.sh"

# --- Debian packages -------------------------------------------------------------------------
# qemu-system-x86 and ipxe-qemu (the virtio NIC's boot ROM) are usually there already for the OKD tests.
packages=(libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients python3-libvirt qemu-system-x86 ipxe-qemu python3-venv)
missing=()
for p in "${packages[@]}"; do
    [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" == "install ok installed" ]] || missing+=("$p")
done
if ((${#missing[@]})); then
    if ! apt-cache show "${missing[@]}" >/dev/null 2>&1; then
        log "apt-get update"
        as_root apt-get update -qq >&2
    fi
    log "apt-get install ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
[[ -x "$python" ]] || die "$python not found (Debian's python3; python3-libvirt is built for it)"

# --- sushy-tools in a venv -------------------------------------------------------------------
stamp="sushy-tools==$SUSHY_TOOLS_VERSION $("$python" --version 2>&1)"
if [[ "$(cat "$venv/.stamp" 2>/dev/null)" == "$stamp" && -x "$venv/bin/sushy-emulator" ]]; then
    exit 0
fi
log "creating venv $venv with sushy-tools==$SUSHY_TOOLS_VERSION"
rm -rf "$venv"
mkdir -p "$dir"
"$python" -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
    "sushy-tools==$SUSHY_TOOLS_VERSION" >&2
"$venv/bin/python" -c 'import libvirt, bcrypt, sushy_tools' \
    || die "the venv at $venv cannot import libvirt, bcrypt and sushy_tools"
[[ -x "$venv/bin/sushy-emulator" ]] || die "sushy-tools installed no $venv/bin/sushy-emulator"
printf '%s\n' "$stamp" >"$venv/.stamp"
log "ready in $dir"
