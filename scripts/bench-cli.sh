#!/usr/bin/env bash
# bench-cli.sh — end-to-end speed of the bulk commands on the SpamAssassin
# public corpus: `nddmilter report DIR` (the corpus's spam into a fresh,
# fsynced store) and `nddmilter check DIR` (every message of the corpus
# against that store, output in input order). Prints messages/s of
# wall-clock time and CPU time per message (user + system, whole process:
# startup included), with the load average, and keeps a CPU profile of
# each run (go tool pprof -top BIN PROFILE).
#
# Usage: scripts/bench-cli.sh [CORPUS_DIR]   (default: .cache/spamassassin,
#        fetched by scripts/fetch-corpus.sh)
# Env:   NDD_BIN   the binary (default: built into a temporary folder)
#        NDD_OUT   where the profiles go (default: a temporary folder)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
corpus=${1:-$root/.cache/spamassassin}
[ -d "$corpus/spam" ] || { echo "bench-cli: no $corpus/spam (run scripts/fetch-corpus.sh)" >&2; exit 1; }
command -v /usr/bin/time >/dev/null || { echo "bench-cli: /usr/bin/time is required (apt-get install time)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=${NDD_OUT:-$tmp}
bin=${NDD_BIN:-}
if [ -z "$bin" ]; then
	bin=$tmp/nddmilter
	(cd "$root" && go build -o "$bin" ./cmd/nddmilter)
fi

count() { find "$@" -type f -name "*.eml" | wc -l; }

# run NAME MESSAGES ARGS...: one timed run of the binary.
run() {
	local name=$1 n=$2
	shift 2
	local load
	load=$(cut -d' ' -f1-3 /proc/loadavg)
	/usr/bin/time -f '%e %U %S' -o "$tmp/time" "$bin" --store "$tmp/store" "$@" \
		--cpuprofile "$out/$name.prof" >/dev/null
	read -r wall user sys <"$tmp/time"
	awk -v name="$name" -v n="$n" -v w="$wall" -v u="$user" -v s="$sys" -v load="$load" 'BEGIN {
		printf "%-7s %5d messages in %.2f s: %6.0f messages/s; CPU %.2f s = %.0f µs/message; load average %s\n",
			name, n, w, n / w, u + s, 1e6 * (u + s) / n, load
	}'
}

run report "$(count "$corpus/spam")" report "$corpus/spam"
run check "$(count "$corpus")" check "$corpus"
echo "profiles: $out/report.prof $out/check.prof (go tool pprof -top $bin PROFILE)"
