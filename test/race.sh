#!/usr/bin/env bash
# The race detector over the packages whose goroutines share state: the
# fleet node (applier, batcher, outbox, status loops), the store (hit
# buffers, filters, background loops), the engine's errgroup pool, the
# milter sessions, the API, the daemon's reloads and the dashboard.
# -race needs cgo: a C compiler (Debian's gcc and libc6-dev) is installed
# when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v gcc >/dev/null 2>&1 || [ ! -e /usr/include/stdlib.h ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "race: installing gcc and libc6-dev from Debian's packages"
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc libc6-dev) >/dev/null
	else
		echo "race: no C compiler and cannot install one (not root): -race needs cgo" >&2
		exit 1
	fi
fi
CGO_ENABLED=1 go test -race -count=1 ./internal/fleet/... ./internal/store ./internal/campaign ./internal/pipeline \
	./internal/milter/... ./internal/api ./internal/daemon ./internal/dashboard ./internal/spool ./internal/reportclient
