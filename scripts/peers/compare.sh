#!/usr/bin/env bash
# compare.sh — nddmilter and rspamd's fuzzy_check side by side on the
# SpamAssassin public corpus (docs/design/methods.md). One command, bounded in time:
#
#   scripts/peers/compare.sh [FLAGS...]
#
# 1. fetches the corpus (scripts/fetch-corpus.sh, cached in .cache/),
# 2. builds the driver (scripts/peers/compare) and the nddmilter binary,
# 3. starts a private rspamd with a local fuzzy storage on loopback
#    (scripts/peers/rspamd.sh, fresh storage) and a private Pyzor server
#    (scripts/peers/pyzor.sh, empty database; PEERS_PYZOR=0 skips it), runs
#    the driver, stops both,
# 4. prints the Markdown tables and keeps them in .cache/peers/last-run.md.
#
# FLAGS go to the driver (go run ./scripts/peers/compare -h lists them), e.g.
# -runs 5, -max 2000, -tools rspamd-milter,nddmilter-milter, -seed 2.
# PEERS_TIMEOUT (seconds, default 1140) bounds the whole run; PEERS_REPORT
# names the report file (default .cache/peers/last-run.md). Environment
# for rspamd.sh passes through (e.g. RSPAMD_FUZZY_MIN_BYTES=0).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
export PATH="$PATH:/usr/local/go/bin"
limit=${PEERS_TIMEOUT:-1140}
out=.cache/peers
report=${PEERS_REPORT:-$out/last-run.md}
mkdir -p "$out/bin" "$(dirname "$report")"

corpus=$(scripts/fetch-corpus.sh spamassassin | tail -1)
[ -d "$corpus/spam" ] || { echo "compare.sh: no corpus at $corpus" >&2; exit 1; }

go build -o "$out/bin/compare" ./scripts/peers/compare
cli=()
if go build -o "$out/bin/nddmilter" ./cmd/nddmilter 2>"$out/build.log"; then
	cli=(-ndd-cli "$out/bin/nddmilter")
else
	echo "compare.sh: nddmilter binary does not build (see $out/build.log); skipping the CLI cross-check" >&2
fi

{
	echo "# nddmilter vs rspamd fuzzy_check — $(date -u +%Y-%m-%dT%H:%MZ)"
	echo
	echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); $(rspamd --version 2>/dev/null | head -1 || echo rspamd not installed); $(go version | awk '{print $3}'); nddmilter $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?') (work tree)."
	echo "Command: ${RSPAMD_FUZZY_MIN_BYTES:+RSPAMD_FUZZY_MIN_BYTES=$RSPAMD_FUZZY_MIN_BYTES }scripts/peers/compare.sh $*"
	echo
} >"$report"

pyzor=()
if [ "${PEERS_PYZOR:-1}" != 0 ]; then
	if scripts/peers/pyzor.sh install; then
		pyzor=(scripts/peers/pyzor.sh run --)
	else
		echo "compare.sh: Pyzor unavailable; measuring without it" >&2
	fi
fi

rc=0
timeout --signal=TERM --kill-after=60 "$limit" \
	scripts/peers/rspamd.sh --fresh run -- "${pyzor[@]}" \
	"$out/bin/compare" -corpus "$corpus" -workdir "$out/work.$$" "${cli[@]}" -v "$@" >>"$report" || rc=$?
rm -rf "$out/work.$$"
cat "$report"
if [ "$rc" != 0 ]; then
	echo "compare.sh: the comparison failed or timed out (exit $rc)" >&2
fi
exit "$rc"
