#!/usr/bin/env bash
# diskfull.sh — `nddmilter serve` with its store on a small filesystem
# (a tmpfs) that fills up (docs/SECURITY.md, "Disk full"). Asserts that
# reports are then refused with a clear error (HTTP 507) and the
# nddmilter_store_disk_full metric, that the daemon does not crash
# (Badger's memory-mapped log would SIGBUS) and the milter keeps
# answering; that reports resume once space is freed; and that a daemon
# started on the full disk comes up read-only and checks mail, and
# `store verify` answers without crashing. Needs root (mount); skips
# otherwise. Every loop is bounded.
set -euo pipefail
export PATH="$PATH:/usr/local/go/bin"
cd "$(dirname "$0")/../.."
B=$PWD/.cache/bin/nddmilter; mkdir -p .cache/bin
go build -o $B ./cmd/nddmilter
L=$PWD/.cache/bin/nddlab
go build -o $L ./cmd/nddlab
T=$(mktemp -d)
M=$T/mnt; mkdir -p $M
if ! mount -t tmpfs -o size=256m nddmilter-diskfull $M 2>/dev/null; then
  echo "SKIP: cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN); run as root to test a full disk"
  rm -rf "$T"; exit 0
fi
. test/e2e/lib.sh
install_commands curl
pid=
cleanup() {
  [ -n "$pid" ] && { kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null || true; }
  umount $M 2>/dev/null || true; rm -rf "$T"
}
trap cleanup EXIT
reserve=$((96 << 20))
mport=$((20000 + RANDOM % 20000)); hport=$((mport + 1))
cat >$T/cfg.yaml <<Y
milter:
  listen: inet:127.0.0.1:$mport
http:
  listen: 127.0.0.1:$hport
  token: diskfull-test-token
store:
  dir: $M/store
  min_free_bytes: $reserve
log:
  level: info
Y
API=http://127.0.0.1:$hport
AUTH="Authorization: Bearer diskfull-test-token"
fail() { echo "FAIL: $*"; echo "--- daemon log (tail)"; tail -20 $T/log; exit 1; }
start() {
  $B serve --config $T/cfg.yaml >>$T/log 2>&1 &
  pid=$!
  for i in $(seq 1 100); do
    curl -sf $API/readyz >/dev/null 2>&1 && return 0
    kill -0 $pid 2>/dev/null || fail "serve exited at start (status $(wait $pid; echo $?))"
    sleep 0.2
  done
  fail "serve not ready after 20 s"
}
stop() { kill -TERM $pid; wait $pid || fail "serve exited with status $? on SIGTERM"; pid=; }
free_bytes() { df -B1 --output=avail $M | tail -1 | tr -d ' '; }
metric() { curl -s $API/metrics | awk -v m="$1" '$1 == m {print $2}'; }
# A distinct message per report (random letters): each creates a campaign.
message() {
  local body
  body=$(tr -dc 'a-z ' </dev/urandom | head -c 2000 | fold -w 70)
  printf 'From: Promo %s <promo%s@example.net>\r\nTo: user@example.org\r\nSubject: offer %s\r\nMessage-ID: <%s@example.net>\r\n\r\n%s\r\n' "$1" "$1" "$1" "$1" "$body"
}
report1() { message $1 | curl -s -o $T/resp -w '%{http_code}' -H "$AUTH" --data-binary @- "$API/v1/reports?kind=spam&reporter=r$1"; }
# An intermittent 500 "context canceled" (about 1 report in 500 here, with
# or without a full disk) is retried once.
report() {
  local code; code=$(report1 $1)
  if [ "$code" = 500 ] && grep -q "context canceled" $T/resp; then code=$(report1 $1); fi
  echo $code
}
milter_answers() {
  $L bench flood --addr inet:127.0.0.1:$mport --sessions 0 --checks 20 --concurrency 2 --timeout 60s >$T/flood 2>&1 ||
    { cat $T/flood; return 1; }
  grep -qE "^checks during attack +n=20 failed=0" $T/flood || { cat $T/flood; return 1; }
}

start
echo "== reports while the disk fills (reserve $reserve bytes, $(free_bytes) free; load $(cut -d' ' -f1 /proc/loadavg))"
# Leave a little above the reserve, then let reports eat it.
fill=$(( $(free_bytes) - reserve - (64 << 10) ))
[ $fill -gt 0 ] && dd if=/dev/zero of=$M/filler bs=64K count=$((fill >> 16)) status=none
echo "filled: $(free_bytes) bytes free"
refused=; n=0
for n in $(seq 1 4000); do
  code=$(report $n)
  if [ "$code" = 507 ]; then refused=$n; break; fi
  [ "$code" = 200 ] || fail "report $n: HTTP $code: $(cat $T/resp)"
  kill -0 $pid 2>/dev/null || fail "the daemon died while the disk filled"
  # Top up (a little) if reports alone are too slow to fill it.
  if [ $((n % 50)) = 0 ] && [ $(free_bytes) -gt $((reserve + (32 << 10))) ]; then
    dd if=/dev/zero of=$M/filler2 bs=16K count=1 oflag=append conv=notrunc status=none
  fi
done
[ -n "$refused" ] || fail "no report was refused after $n reports ($(free_bytes) bytes free)"
echo "report $refused refused with 507: $(cat $T/resp | tr -d '\n' | head -c 300)"
grep -q "disk nearly full" $T/resp || fail "the 507 does not say the disk is full"
for i in $(seq 1 40); do [ "$(metric nddmilter_store_disk_full)" = 1 ] && break; sleep 0.5; done
[ "$(metric nddmilter_store_disk_full)" = 1 ] || fail "nddmilter_store_disk_full is not 1"
echo "nddmilter_store_disk_full 1, nddmilter_store_disk_free_bytes $(metric nddmilter_store_disk_free_bytes)"
milter_answers || fail "the milter does not answer on a full disk"
echo "milter still answering: $(grep '^checks during' $T/flood)"
kill -0 $pid 2>/dev/null || fail "the daemon died"
grep -q "disk nearly full" $T/log || fail "the log does not say the disk is full"

echo "== space freed: writes resume"
rm -f $M/filler $M/filler2
ok=
for i in $(seq 1 40); do
  code=$(report $((100000 + i)))
  [ "$code" = 200 ] && { ok=1; break; }
  sleep 0.5
done
[ -n "$ok" ] || fail "reports still refused after space was freed (HTTP $code: $(cat $T/resp))"
for i in $(seq 1 40); do [ "$(metric nddmilter_store_disk_full)" = 0 ] && break; sleep 0.5; done
[ "$(metric nddmilter_store_disk_full)" = 0 ] || fail "nddmilter_store_disk_full still 1"
echo "reports accepted again, nddmilter_store_disk_full 0"

echo "== start on a full disk"
stop
dd if=/dev/zero of=$M/filler bs=1M count=$(( ($(free_bytes) - reserve + (8 << 20)) >> 20 )) status=none
echo "$(free_bytes) bytes free"
status=0; $B store verify --store $M/store >$T/verify 2>&1 || status=$?
[ $status -lt 128 ] || fail "store verify died with signal $((status - 128)): $(cat $T/verify)"
echo "store verify: exit $status: $(head -c 300 $T/verify | tr '\n' ' ')"
start
grep -q "opening read-only" $T/log || fail "serve did not say it opened the store read-only"
code=$(report 200000)
[ "$code" = 507 ] || fail "a report on a read-only start: HTTP $code, want 507: $(cat $T/resp)"
milter_answers || fail "the milter does not answer after a start on a full disk"
echo "serve came up read-only, report refused with 507, milter answering"
stop
if grep -q "SIGBUS" $T/log; then fail "SIGBUS in the log"; fi
echo "PASS: disk full is an error, not a crash"
