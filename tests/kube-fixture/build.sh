#!/usr/bin/env bash
# Builds kube-fixture (kube-apiserver + embedded etcd, kube-controller-manager, kube-scheduler
# and kubectl in one binary), a kubectl symlink beside it, and kwok (a separate binary: it is
# built from its own module graph, see README.md). Skips each build when its inputs are
# unchanged. Progress goes to stderr; the last line on stdout is the path of kube-fixture.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin_dir="${HARMONY_FIXTURE_BIN_DIR:-$HOME/.cache/harmony/kube-fixture/bin}"
export GOCACHE="${GOCACHE:-$HOME/.cache/harmony/go-build}"
export GOMODCACHE="${GOMODCACHE:-$HOME/.cache/harmony/go-mod}"
# Static binary like upstream's, and no C toolchain needed.
export CGO_ENABLED=0
# Build with the machine's Go; never try to download another toolchain.
export GOTOOLCHAIN=local

# kwok is built with `go install` at this version from its own go.mod/go.sum (see README.md).
kwok_version=v0.8.0

bin="$bin_dir/kube-fixture"
stamp="$bin_dir/kube-fixture.stamp"
kwok="$bin_dir/kwok"
kwok_stamp="$bin_dir/kwok.stamp"
mkdir -p "$bin_dir"
cd "$here"

# Parallel test runs may all call this script; only one of them should compile.
if command -v flock >/dev/null; then
	exec 9>"$bin_dir/.build.lock"
	flock 9
fi

# The Kubernetes version comes from go.mod, so /version always matches the code.
k8s_version="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v1\./ { print $2 }' go.mod)"
minor="$(cut -d. -f2 <<<"$k8s_version")"
[[ -n "$k8s_version" && -n "$minor" ]] || { echo "cannot find k8s.io/kubernetes in go.mod" >&2; exit 1; }

# Inputs: module files, sources, the embedded kwok stages, this script (flags) and the Go
# toolchain.
want="$( { go version; cat build.sh go.mod go.sum; LC_ALL=C ls -- *.go stages/*.yaml | while read -r f; do echo "$f"; cat "$f"; done; } | sha256sum | cut -d' ' -f1)"

if [[ -x "$bin" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
	echo "kube-fixture $k8s_version is up to date" >&2
else
	echo "building kube-fixture $k8s_version into $bin_dir (a cold build takes ~15 min on 2 cores)" >&2
	start=$SECONDS
	pkg=k8s.io/component-base/version
	go build -trimpath -buildvcs=false \
		-ldflags "-s -w -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean" \
		-o "$bin.tmp" .
	# Rename so a fixture that is running from the old binary is not disturbed.
	mv -f "$bin.tmp" "$bin"
	echo "$want" >"$stamp"
	echo "built in $((SECONDS - start))s" >&2
fi

# kwok's inputs: its pinned version (the module and its go.sum are immutable), this script and
# the Go toolchain.
kwok_want="$( { go version; echo "$kwok_version"; cat build.sh; } | sha256sum | cut -d' ' -f1)"
if [[ -x "$kwok" && -f "$kwok_stamp" && "$(cat "$kwok_stamp")" == "$kwok_want" ]]; then
	echo "kwok $kwok_version is up to date" >&2
else
	echo "building kwok $kwok_version into $bin_dir" >&2
	start=$SECONDS
	tmp_bin="$(mktemp -d "$bin_dir/.kwok-build.XXXXXX")"
	trap 'rm -rf "$tmp_bin"' EXIT
	# `go install pkg@version` ignores the go.mod of the current directory and builds kwok from
	# its own module graph (k8s.io v0.36), which cannot share kube-fixture's (v0.35).
	GOBIN="$tmp_bin" go install -trimpath -buildvcs=false -ldflags "-s -w" \
		"sigs.k8s.io/kwok/cmd/kwok@$kwok_version"
	mv -f "$tmp_bin/kwok" "$kwok"
	echo "$kwok_want" >"$kwok_stamp"
	echo "built kwok in $((SECONDS - start))s" >&2
fi

ln -sfn kube-fixture "$bin_dir/kubectl"
echo "$bin"
