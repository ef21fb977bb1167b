#!/usr/bin/env bash
# bench-milter.sh — the milter measurements, on a quiet
# machine: `nddlab bench milter` in-process at 2, 3, 4, 8 and 16
# sessions over TCP, 4 over a Unix socket and 4 replying to every step,
# three rounds interleaved; then `nddmilter serve` in its own process
# driven at 3, 4 and 8 sessions (daemon CPU from /proc); then the milter
# path alone (BenchmarkSession). About 4 minutes once the store of 1
# million campaigns exists (the first run builds it, about 15 minutes).
#
#   scripts/bench-milter.sh [OUTFILE]
set -u
export PATH="$PATH:/usr/local/go/bin"
cd "$(dirname "$0")/.."
B=.cache/bin/nddmilter; L=.cache/bin/nddlab; mkdir -p .cache/bin
go build -o $B ./cmd/nddmilter || exit 1
go build -o $L ./cmd/nddlab || exit 1
D=.cache/eval-bench-milter
out=${1:-/dev/stdout}
: >"$out"
run() { echo "### $* (load $(cut -d' ' -f1 /proc/loadavg))" >>"$out"; $L bench milter --messages 20000 --campaigns 1000000 --dir $D "$@" 2>&1 | grep -E "throughput|cpu |latency|actions|memory" >>"$out"; }
for i in 1 2 3; do
  for s in 2 3 4 8; do run --sessions $s; done
  run --sessions 4 --network unix
  run --sessions 16
  run --sessions 4 --reply-each-step
done
# daemon in its own process, info log on (one line per message), metrics on
P=$(mktemp -d)
cat >$P/cfg.yaml <<Y
milter:
  listen: inet:127.0.0.1:18899
http:
  listen: 127.0.0.1:18898
store:
  dir: $PWD/$D
log:
  format: json
Y
# The daemon needs the store built by the in-process runs above.
$B serve --config $P/cfg.yaml >$P/log 2>&1 &
pid=$!
for t in $(seq 1 120); do curl -sf http://127.0.0.1:18898/readyz >/dev/null && break; sleep 1; done
for i in 1 2 3; do
  for s in 3 4 8; do
    c0=$(awk '{print $14+$15}' /proc/$pid/stat)
    echo "### separate daemon, TCP, $s sessions (load $(cut -d' ' -f1 /proc/loadavg))" >>"$out"
    $L bench milter --addr inet:127.0.0.1:18899 --messages 20000 --sessions $s 2>&1 | grep -E "throughput|cpu |latency|actions" >>"$out"
    c1=$(awk '{print $14+$15}' /proc/$pid/stat)
    echo "daemon cpu      $(( (c1-c0)*10000*1000/20000/1000 )) µs per message (from /proc/$pid/stat)" >>"$out"
  done
done
grep -E "VmRSS|VmHWM" /proc/$pid/status >>"$out"
kill -TERM $pid; wait $pid
echo "### go test -bench Session" >>"$out"
go test -run '^$' -bench 'Session' -benchtime 3000x -count 3 -cpu 1 ./internal/milter/ 2>&1 | grep Benchmark >>"$out"
rm -rf "$P"
echo done >>"$out"
