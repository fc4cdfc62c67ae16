#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit, compile-fail and end-to-end tests.
# README.md's test command. The end-to-end suites start their own real processes (kube-apiserver,
# PostgreSQL 18, haproxy, dnsmasq, QEMU, ...); setup.sh installs whatever of those is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*" >&2; }

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
