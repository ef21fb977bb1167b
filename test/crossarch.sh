#!/usr/bin/env bash
# Signatures and sketches are a wire format: every mail server of a fleet,
# whatever its CPU, must compute the same ones. This runs the signature
# packages' tests (golden vectors included) compiled for arm64 under
# qemu-user, next to the native amd64 run of `go test ./...`.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(go env GOARCH)" != amd64 ]; then
	echo "crossarch: native arch is $(go env GOARCH); the native test run covers it"
	exit 0
fi
if ! command -v qemu-aarch64 >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "crossarch: installing qemu-user from Debian's packages"
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-user) >/dev/null
	else
		echo "crossarch: qemu-aarch64 missing and cannot be installed (not root); skipped"
		exit 0
	fi
fi
GOARCH=arm64 go test -count=1 -exec qemu-aarch64 \
	./internal/fmath/ ./internal/mime/ ./internal/imatchbag/ ./internal/andd/ ./internal/pipeline/ ./internal/shortsig/ ./internal/qgram/
