#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit, compile-fail and end-to-end tests.
# README.md's test command. The end-to-end suites start their own real processes (kube-apiserver,
# PostgreSQL 18, haproxy, dnsmasq, QEMU, ...); setup.sh installs whatever of those is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*" >&2; }

# A blessed run rewrites the golden files instead of comparing with them, so it can never fail:
# in CI (CI set to anything but empty, 0 or false; the golden tests apply the same rule) it is
# refused before anything runs.
if [[ -n "${CI:-}" && "${CI,,}" != "0" && "${CI,,}" != "false" ]]; then
    for var in UPDATE_GOLDEN HARMONY_BLESS; do
        if [[ -n "${!var+set}" ]]; then
            echo "tests/run.sh: $var is set in CI (CI=$CI): a blessed run rewrites the golden files instead of comparing with them, so it can never fail; unset $var (bless locally and commit the reviewed golden files)" >&2
            exit 2
        fi
    done
    if [[ "${TRYBUILD:-}" == overwrite ]]; then
        echo "tests/run.sh: TRYBUILD=overwrite in CI (CI=$CI): it rewrites the compile-fail tests' expected .stderr files, so they can never fail; unset TRYBUILD" >&2
        exit 2
    fi
fi

step "tools the suites start (tests/setup.sh; installs only what is missing)"
bash tests/setup.sh

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "kube-apiserver fixture (built from k8s.io/kubernetes Go modules; cached)"
HARMONY_KUBE_FIXTURE="$(bash tests/kube-fixture/build.sh | tail -n 1)"
export HARMONY_KUBE_FIXTURE

step "cargo test (unit, compile-fail, render mode, real API servers)"
cargo test --workspace --locked
