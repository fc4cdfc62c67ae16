#!/usr/bin/env bash
# Installs the tools the test suite needs on a fresh machine. Idempotent: installs only what is missing.
set -euo pipefail

need_rust_components() {
    for c in rustfmt clippy; do
        rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
    done
}

command -v cargo >/dev/null || { echo "error: cargo not found; install Rust with rustup first" >&2; exit 2; }
need_rust_components
