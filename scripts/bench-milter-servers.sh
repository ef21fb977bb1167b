#!/usr/bin/env bash
# bench-milter-servers.sh — the comparison of docs/design/milter.md, "Why our
# own server": `nddlab bench milter` with the own server, with
# github.com/d--j/go-milter's server relaying to it, and with
# the latter on buffered sockets, at 3 and 8 sessions, ROUNDS rounds
# interleaved (default 3), each line with the load average at its start.
# The store of 100,000 campaigns is built on the first run (about 20 s).
#
#   scripts/bench-milter-servers.sh [OUTFILE] [MESSAGES] [ROUNDS]
set -u
export PATH="$PATH:/usr/local/go/bin"
cd "$(dirname "$0")/.."
B=.cache/bin/nddlab; mkdir -p .cache/bin
go build -o $B ./cmd/nddlab || exit 1
out=${1:-/dev/stdout}
msgs=${2:-20000}
rounds=${3:-3}
: >"$out"
for i in $(seq "$rounds"); do
  for s in 3 8; do
    for srv in own d--j d--j-buffered; do
      echo "### --server $srv --sessions $s (load $(cut -d' ' -f1 /proc/loadavg))" >>"$out"
      $B bench milter --campaigns 100000 --messages "$msgs" --sessions $s --server $srv \
        --dir .cache/bench-milter-v3-100k 2>&1 | grep -E "throughput|cpu |latency|actions" >>"$out"
    done
  done
done
echo done >>"$out"
