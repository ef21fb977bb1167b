#!/usr/bin/env bash
# The race detector over the packages whose goroutines share state: the
# fleet node (applier, batcher, outbox, status loops), the store (hit
# buffers, filters, background loops), the engine's errgroup pool and the
# signing pipeline, the milter sessions, the API and report socket, the
# daemon's reloads, the dashboard, the spool and the report client.
# -race needs cgo: a C compiler (Debian's gcc and libc6-dev) is installed
# when missing (apt_install of test/e2e/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. test/e2e/lib.sh
install_commands gcc
[ -e /usr/include/stdlib.h ] || apt_install libc6-dev
CGO_ENABLED=1 go test -race -count=1 ./internal/fleet/... ./internal/store ./internal/campaign ./internal/pipeline \
	./internal/milter/... ./internal/api ./internal/daemon ./internal/dashboard ./internal/spool ./internal/reportclient
