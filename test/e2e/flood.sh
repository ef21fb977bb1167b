#!/usr/bin/env bash
# flood.sh — hostile milter sessions against `nddmilter serve` on loopback
# (docs/SECURITY.md, "Resource budgets"): prints the daemon's VmRSS and the
# p99 of normal checks during the attack, and fails if the peak VmRSS
# exceeds the ceiling or a normal message went unchecked or failed.
#
#   test/e2e/flood.sh            # the measured goal: 500 sessions, 512 MB
#   test/e2e/flood.sh --ci       # small and quick (CI): 60 sessions, budget 16 MiB
set -euo pipefail
export PATH="$PATH:/usr/local/go/bin"
cd "$(dirname "$0")/../.."
sessions=500 hdr=1048576 body=1048576 pkt=921600 ceiling_mb=512 budget=134217728 checks=200
if [ "${1:-}" = "--ci" ]; then
  sessions=60 hdr=262144 body=262144 pkt=262144 ceiling_mb=256 budget=16777216 checks=50
fi
B=.cache/bin/nddmilter; mkdir -p .cache/bin
go build -o $B ./cmd/nddmilter
L=.cache/bin/nddlab
go build -o $L ./cmd/nddlab
T=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
cat >$T/cfg.yaml <<Y
milter:
  listen: inet:127.0.0.1:$port
  max_buffered_bytes: $budget
http:
  listen: ""
store:
  dir: $T/store
log:
  level: warn
Y
$B serve --config $T/cfg.yaml >$T/log 2>&1 &
pid=$!
cleanup() { kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null || true; rm -rf "$T"; }
trap cleanup EXIT
for i in $(seq 1 100); do
  (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break
  kill -0 $pid 2>/dev/null || { cat $T/log; exit 1; }
  sleep 0.1
done
ulimit -n 4096 2>/dev/null || true
echo "== $sessions hostile sessions, milter.max_buffered_bytes $budget (load $(cut -d' ' -f1 /proc/loadavg))"
$L bench flood --addr inet:127.0.0.1:$port --pid $pid --sessions $sessions --header-bytes $hdr \
  --body-bytes $body --packet-bytes $pkt --checks $checks --timeout 3m | tee $T/out
kill -0 $pid || { echo "FAIL: the daemon died"; cat $T/log; exit 1; }
peak=$(awk '/daemon VmRSS/ {for (i=1;i<=NF;i++) if ($i=="peak") print int($(i+1))}' $T/out)
fail=0
if [ -z "$peak" ] || [ "$peak" -gt "$ceiling_mb" ]; then echo "FAIL: peak VmRSS ${peak:-?} MB > $ceiling_mb MB"; fail=1; fi
if grep -E "^checks during" $T/out | grep -qE "failed=[1-9]|unchecked"; then echo "FAIL: normal messages failed or went unchecked during the attack"; fail=1; fi
if ! grep -qE "hostile sessions +$sessions waiting" $T/out; then echo "FAIL: not every hostile session got its load in"; fail=1; fi
[ $fail = 0 ] && echo "PASS: peak VmRSS $peak MB <= $ceiling_mb MB, normal checks all answered"
exit $fail
