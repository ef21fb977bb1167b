#!/usr/bin/env bash
# pyzor.sh — a private Pyzor server (pyzord, gdbm database) on loopback.
#
# Pyzor is one of the older collaborative tools administrators use for the
# same job (exact digests of the normalized body, shared through a server).
# The public servers are on the internet; pyzord runs the same server
# locally, so a comparison can report and check without a network.
#
# Usage:
#   scripts/peers/pyzor.sh [--dir DIR] run -- COMMAND [ARG...]
#       start pyzord with an empty database, run COMMAND with
#       PYZOR_SERVER=127.0.0.1:PORT, stop pyzord, exit with COMMAND's status.
#   scripts/peers/pyzor.sh install
#       install the Debian packages pyzor and python3-gdbm if missing.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="$repo/.cache/pyzor"
pid=

die() { echo "pyzor.sh: $*" >&2; exit 1; }
log() { echo "pyzor.sh: $*" >&2; }

install_pyzor() {
	if command -v pyzord >/dev/null && /usr/bin/python3 -c 'import dbm.gnu' 2>/dev/null; then
		return 0
	fi
	[ "$(id -u)" = 0 ] || die "pyzor is not installed; run as root or: apt-get install pyzor python3-gdbm"
	log "installing the Debian packages pyzor python3-gdbm"
	export DEBIAN_FRONTEND=noninteractive
	command -v pyzord >/dev/null || timeout 600 apt-get update -qq >/dev/null
	timeout 900 apt-get install -y -qq --no-install-recommends pyzor python3-gdbm >/dev/null
}

# free_udp_port picks a random free UDP port below the ephemeral range.
free_udp_port() {
	local p lo=32768
	read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
	[ "$lo" -gt 11000 ] || lo=32768
	for _ in $(seq 1 200); do
		p=$((10000 + (RANDOM * 32768 + RANDOM) % (lo - 10000)))
		if [ -z "$(ss -Hlnu "sport = :$p" 2>/dev/null)" ]; then
			echo "$p"
			return 0
		fi
	done
	die "no free port found"
}

cmd_run() {
	[ $# -gt 0 ] || die "run: missing COMMAND"
	install_pyzor
	rm -rf "$dir"
	mkdir -p "$dir"
	local port
	port=$(free_udp_port)
	echo "127.0.0.1:$port" >"$dir/servers"
	trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; wait 2>/dev/null || true' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	pyzord --homedir "$dir" -a 127.0.0.1 -p "$port" -e gdbm --dsn "$dir/digests.db" \
		--log-file "$dir/pyzord.log" </dev/null >>"$dir/stdout.log" 2>&1 &
	pid=$!
	local deadline=$((SECONDS + 30))
	until pyzor --homedir "$dir" --servers-file "$dir/servers" ping >/dev/null 2>&1; do
		kill -0 "$pid" 2>/dev/null || die "pyzord exited: $(tail -3 "$dir/stdout.log")"
		[ "$SECONDS" -lt "$deadline" ] || die "pyzord not answering after 30s"
		sleep 0.3
	done
	log "pyzord $(dpkg-query -W -f '${Version}' pyzor 2>/dev/null) ready (pid $pid) on udp 127.0.0.1:$port, dir $dir"
	set +e
	PYZOR_SERVER="127.0.0.1:$port" "$@"
	local rc=$?
	set -e
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	pid=
	return $rc
}

while [ $# -gt 0 ]; do
	case $1 in
	--dir)
		[ $# -ge 2 ] || die "--dir needs a value"
		mkdir -p "$2"
		dir=$(cd "$2" && pwd)
		shift 2
		;;
	run)
		shift
		[ "${1:-}" = "--" ] && shift
		cmd_run "$@"
		exit $?
		;;
	install) install_pyzor; exit 0 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
done
die "missing command: run or install (see --help)"
