#!/usr/bin/env bash
# Installs the tools the test suite needs on a fresh machine. Idempotent: installs only what is
# missing, so tests/run.sh calls it every time (about half a second when everything is there).
set -euo pipefail

need_rust_components() {
    for c in rustfmt clippy; do
        rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
    done
}

command -v cargo >/dev/null || { echo "error: cargo not found; install Rust with rustup first" >&2; exit 2; }
need_rust_components

# The kube-apiserver fixture (tests/kube-fixture) is built from Go modules; go.mod needs Go 1.25+.
command -v go >/dev/null || { echo "error: go not found; the kube-apiserver fixture needs Go 1.25 or newer" >&2; exit 2; }
go_minor="$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')"
[[ "$go_minor" =~ ^[0-9]+$ && "$go_minor" -ge 25 ]] || { echo "error: $(go env GOVERSION) is too old; the kube-apiserver fixture needs Go 1.25 or newer" >&2; exit 2; }
command -v flock >/dev/null || { apt-get update -qq && apt-get install -y -qq util-linux; }

# PostgreSQL 18 from npm, haproxy and psycopg (libpq >= 17): the PostgreSQL data-path tests
# (tests/pg-datapath), the control plane's PostgreSQL store and the HA suite (N replicas on one
# PostgreSQL behind haproxy: tests/e2e/tests/control_plane_ha.rs, the agents benchmark).
bash "$(dirname "$0")/pg-datapath/install.sh"

# Emulated BMCs (tests/e2e/src/bmc_lab.rs): an unprivileged libvirtd with QEMU VMs behind the
# sushy-tools Redfish emulator (pinned, in a venv under ~/.cache/harmony/redfish-bmc).
bash "$(dirname "$0")/redfish-bmc/install.sh"

# Bare-metal OKD end-to-end tests (tests/e2e/tests/okd_*.rs): real dnsmasq, a DHCP client, iPXE
# firmware under QEMU, haproxy, dig, openssl, network namespaces and tmux for the prompt tests.
# dnsmasq-base has no system service, so nothing grabs port 53 outside the tests' namespaces.
okd_missing=()
for tool in dnsmasq:dnsmasq-base busybox:busybox qemu-system-x86_64:qemu-system-x86 haproxy:haproxy dig:dnsutils ip:iproute2 openssl:openssl tmux:tmux; do
    command -v "${tool%%:*}" >/dev/null || okd_missing+=("${tool##*:}")
done
[[ -e /usr/share/qemu/pxe-virtio.rom || -e /usr/lib/ipxe/qemu/pxe-virtio.rom ]] || okd_missing+=(ipxe-qemu)
# The iPXE binaries the OKD example serves over TFTP when applying (example_okd_workers.rs).
[[ -e /usr/lib/ipxe/undionly.kpxe && -e /usr/lib/ipxe/ipxe.efi ]] || okd_missing+=(ipxe)
# The discovery image (discovery-image/build.sh, tests/e2e/tests/okd_discovery_qemu.rs).
for tool in cpio:cpio strip:binutils dpkg-deb:dpkg; do
    command -v "${tool%%:*}" >/dev/null || okd_missing+=("${tool##*:}")
done
# build.sh fetches the kernel with apt-get download: the package lists must know it.
apt-cache show linux-image-amd64 >/dev/null 2>&1 || apt-get update -qq
if ((${#okd_missing[@]})); then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${okd_missing[@]}"; fi

# The status page suite (tests/e2e/tests/status_page.rs): headless Chromium from Debian, driven by
# playwright-core (pinned in tests/e2e/status_page/package-lock.json; it downloads no browser).
[[ -x /usr/bin/chromium ]] || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; }
command -v npm >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm; }
status_page="$(dirname "$0")/e2e/status_page"
# playwright-core drives it; axe-core checks its accessibility. Reinstalled when either's pin moved.
pinned() { grep -q "\"version\": \"$(sed -nE "s/.*\"$1\": \"([^\"]+)\".*/\\1/p" "$status_page/package.json")\"" "$status_page/node_modules/$1/package.json" 2>/dev/null; }
if ! pinned playwright-core || ! pinned axe-core; then
    (cd "$status_page" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
fi
