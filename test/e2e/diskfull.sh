#!/usr/bin/env bash
# End-to-end test: `nddmilter serve` with its store on a small filesystem
# that fills up (docs/SECURITY.md, "Disk full"), on a tmpfs and on a
# loop-mounted ext4 (300 MB; skipped, saying so, where no loop device
# can be set up). On each filesystem:
#   a) the disk fills while reports come: refused with HTTP 507 and a clear message,
#      the nddmilter_store_disk_full metric, the milter keeps answering;
#      space freed, reports are accepted again (live, no restart);
#   b) another process fills the disk (dd): reports refused (507);
#      SIGTERM: serve exits 0, not killed by a signal (Badger's memory
#      maps would SIGBUS), within milter.shutdown_timeout;
#   c) `store verify` on the full disk answers without crashing;
#   d) restart on the full disk: ready read-only (/readyz, a WARN line,
#      the metric), a copy of a known campaign checked as before, the
#      report acknowledged just before the disk filled is there, reports
#      refused with 507, the milter answering; SIGTERM exits 0;
#   e) space freed and a restart: reports accepted again (after the
#      restart: a store opened read-only stays so until then), nothing
#      acknowledged lost;
#   f) a report right after dd filled the disk: answered, serve alive
#      (before, a stale measurement let it into an unallocated page of
#      Badger's log: SIGBUS); kill -9 with acknowledged reports in the
#      write-ahead log, the disk full, restart: ready read-only with them (the log replayed in
#      memory, not "recovery needs free disk space"); SIGTERM exits 0;
#      space freed, restart: reports accepted, nothing lost.
# Root only (mount, losetup). Bounded in time; cleans up (unmount, loop
# device) in a trap; prints "N passed, N failed" and exits non-zero on
# failure. Environment: NDD_E2E_TIMEOUT (seconds, default 900),
# NDD_E2E_KEEP (a folder to keep the logs in), NDD_BIN (a built nddmilter
# to test).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export PATH=$PATH:/usr/local/go/bin:/usr/sbin:/sbin
TIME_LIMIT=${NDD_E2E_TIMEOUT:-900}

# pass, fail, die, free_port, the watchdog, builds, campaign_text.
. "$ROOT/test/e2e/lib.sh"

skip_unless_root "the disk-full end-to-end test needs root (it mounts a tmpfs and a loop device)"
install_commands curl mkfs.ext4=e2fsprogs losetup=mount

T=$(mktemp -d /tmp/ndd-e2e-diskfull.XXXXXX)
M=$T/mnt
mkdir -p "$M"
NDD_PID=
LOOP=
unmount_fs() {
	if mountpoint -q "$M"; then
		for _ in $(seq 20); do
			umount "$M" 2>/dev/null && break
			sleep 0.5
		done
		mountpoint -q "$M" && umount -l "$M"
	fi
	if [ -n "$LOOP" ]; then
		losetup -d "$LOOP" 2>/dev/null
		LOOP=
	fi
	return 0
}
cleanup() {
	local rc=$?
	stop_watchdog
	stop_pid "$NDD_PID" KILL
	if [ "$failed" -gt 0 ] || [ "$rc" -ne 0 ]; then
		for f in "$T"/nddmilter-*.log; do
			[ -f "$f" ] || continue
			echo "--- $(basename "$f") (tail)"
			tail -15 "$f" | cut -c1-400
		done
	fi
	keep_logs '*.log'
	unmount_fs
	rm -rf "$T"
	summary_exit "$rc"
}
trap cleanup EXIT
start_watchdog

build_nddmilter
build_nddlab
lexicon_words

RESERVE=$((96 << 20))    # store.min_free_bytes
SHUTDOWN=10              # milter.shutdown_timeout, seconds
TOKEN=diskfull-test-token-0123456789
AUTH="Authorization: Bearer $TOKEN"

free_bytes() { df -B1 --output=avail "$M" | tail -1 | tr -d ' '; }
metric() { curl -s "$API/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
# fill_disk: another process (dd) takes every free block.
fill_disk() {
	dd if=/dev/zero of="$M/filler" bs=1M status=none 2>/dev/null
	dd if=/dev/zero of="$M/filler" bs=4k oflag=append conv=notrunc status=none 2>/dev/null
	sync -f "$M" 2>/dev/null
	echo "disk filled by dd: $(free_bytes) bytes free"
}
free_disk() { rm -f "$M"/filler*; sync -f "$M" 2>/dev/null; }

# A distinct message per report (random letters): each creates a campaign.
random_message() {
	local body
	body=$(tr -dc 'a-z ' </dev/urandom | head -c 2000 | fold -w 70)
	printf 'From: Promo %s <promo%s@example.net>\r\nTo: user@example.org\r\nSubject: offer %s\r\nMessage-ID: <%s@example.net>\r\n\r\n%s\r\n' "$1" "$1" "$1" "$1" "$body"
}
# known_copy N: copy N of the known campaign (campaign_text 1, its
# greeting and reference vary with N).
known_copy() {
	printf 'From: Offers <offers@invest.example>\r\nTo: u%s@example.org\r\nSubject: Exclusive offer for you\r\nMessage-ID: <known-%s@invest.example>\r\n\r\nDear customer %s,\r\n\r\n%s\r\nReference number %s.\r\n' \
		"$1" "$1" "$1" "$(campaign_text 1)" "$((1000 + $1 * 7))"
}
# report FILE REPORTER: the HTTP status; the answer in $T/resp. An
# intermittent 500 "context canceled" is retried once.
report() {
	local code
	code=$(curl -s -o "$T/resp" -w '%{http_code}' -H "$AUTH" --data-binary @"$1" "$API/v1/reports?kind=spam&reporter=$2")
	if [ "$code" = 500 ] && grep -q "context canceled" "$T/resp"; then
		code=$(curl -s -o "$T/resp" -w '%{http_code}' -H "$AUTH" --data-binary @"$1" "$API/v1/reports?kind=spam&reporter=$2")
	fi
	echo "$code"
}
campaign_in() { grep -oE '"campaign": *[0-9]+' "$1" | head -1 | grep -oE '[0-9]+$'; }
# verdict FILE: "CAMPAIGN ACTION" of the API's dry-run check.
verdict() {
	curl -s -H "$AUTH" --data-binary @"$1" "$API/v1/check" >"$T/check" || { echo "none"; return; }
	echo "$(campaign_in "$T/check") $(grep -oE '"action": *"[a-z]+"' "$T/check" | head -1 | cut -d'"' -f4)"
}
milter_answers() {
	"$LAB" bench flood --addr "inet:127.0.0.1:$MPORT" --sessions 0 --checks 20 --concurrency 2 --timeout 60s >"$T/flood" 2>&1 &&
		grep -qE "^checks during attack +n=20 failed=0" "$T/flood"
}

# start_daemon: serve, until /readyz answers (30 s at most); false when
# it exits (START_STATUS) or is not ready.
start_daemon() {
	START_STATUS=
	"$NDD" serve --config "$T/cfg.yaml" >>"$LOG" 2>&1 &
	NDD_PID=$!
	for _ in $(seq 150); do
		curl -sf "$API/readyz" >/dev/null 2>&1 && return 0
		if ! kill -0 "$NDD_PID" 2>/dev/null; then
			wait "$NDD_PID"
			START_STATUS=$?
			NDD_PID=
			return 1
		fi
		sleep 0.2
	done
	START_STATUS="not ready after 30 s"
	return 1
}
# stop_term WHAT: SIGTERM; passes when serve exits 0 (not by a signal)
# within milter.shutdown_timeout plus 5 s.
stop_term() {
	[ -n "$NDD_PID" ] || { fail "$FS: $1: serve is not running"; return; }
	local t0 t1 status
	t0=$(date +%s)
	kill -TERM "$NDD_PID"
	for _ in $(seq $(((SHUTDOWN + 5) * 10))); do
		kill -0 "$NDD_PID" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$NDD_PID" 2>/dev/null; then
		kill -KILL "$NDD_PID"
		wait "$NDD_PID" 2>/dev/null
		NDD_PID=
		fail "$FS: $1: serve still running $((SHUTDOWN + 5)) s after SIGTERM"
		return
	fi
	wait "$NDD_PID"
	status=$?
	t1=$(date +%s)
	NDD_PID=
	if [ "$status" = 0 ]; then
		pass "$FS: $1: SIGTERM, serve exited 0 in $((t1 - t0)) s"
	elif [ "$status" -gt 128 ]; then
		fail "$FS: $1: serve killed by signal $((status - 128)) on SIGTERM"
	else
		fail "$FS: $1: serve exited with status $status on SIGTERM ($(grep -m1 -E 'SIGBUS|fatal|panic' "$LOG" | cut -c1-200))"
	fi
}
# expect_read_only WHAT: serve is up read-only on the full disk.
expect_read_only() {
	if ! start_daemon; then
		fail "$FS: $1: serve did not start on the full disk (status $START_STATUS): $(tail -1 "$LOG" | cut -c1-300)"
		return 1
	fi
	pass "$FS: $1: serve ready on the full disk ($(free_bytes) bytes free)"
	if tail -n 30 "$LOG" | grep -q 'level=WARN msg="store: disk nearly full at start: opening read-only'; then
		pass "$FS: $1: a WARN line says the store is read-only"
	else
		fail "$FS: $1: no WARN line about the read-only start"
	fi
	local m
	m=$(metric nddmilter_store_disk_full)
	[ "$m" = 1 ] && pass "$FS: $1: nddmilter_store_disk_full 1" || fail "$FS: $1: nddmilter_store_disk_full is '$m'"
	random_message ro$RANDOM >"$T/ro.eml"
	local code
	code=$(report "$T/ro.eml" ro)
	if [ "$code" = 507 ] && grep -q "disk nearly full" "$T/resp"; then
		pass "$FS: $1: a report is refused with 507: $(head -c 160 "$T/resp")"
	else
		fail "$FS: $1: a report on the read-only store: HTTP $code: $(head -c 300 "$T/resp")"
	fi
	local v
	v=$(verdict "$T/copy.eml")
	[ -n "$KNOWN" ] && [ "$v" = "$KNOWN_VERDICT" ] && pass "$FS: $1: a copy of the known campaign checked as before ($v)" ||
		fail "$FS: $1: copy of the known campaign: verdict '$v', want '$KNOWN_VERDICT'"
	return 0
}
# expect_acked WHAT FILE CAMPAIGN: the acknowledged report FILE is in
# its campaign.
expect_acked() {
	local v
	v=$(verdict "$2")
	[ -n "$3" ] && [ "${v%% *}" = "$3" ] && pass "$FS: $1: the report acknowledged before is there (campaign $3)" ||
		fail "$FS: $1: the report acknowledged before (campaign $3) is missing: verdict '$v'"
}

# scenario FS: the whole test on the filesystem mounted on $M.
scenario() {
	FS=$1
	LOG=$T/nddmilter-$FS.log
	free_port
	MPORT=$PORT
	free_port
	HPORT=$PORT
	API=http://127.0.0.1:$HPORT
	cat >"$T/cfg.yaml" <<Y
milter:
  listen: inet:127.0.0.1:$MPORT
  shutdown_timeout: ${SHUTDOWN}s
http:
  listen: 127.0.0.1:$HPORT
  token: $TOKEN
store:
  dir: $M/store
  min_free_bytes: $RESERVE
log:
  level: info
Y
	echo "=== $FS: $(free_bytes) bytes free on $M, store.min_free_bytes $RESERVE"
	if ! start_daemon; then
		fail "$FS: serve did not start on an empty disk (status $START_STATUS)"
		return
	fi
	# A known campaign: three reporters, and the verdict on a copy.
	local r code
	for r in 1 2 3; do
		known_copy "$r" >"$T/known$r.eml"
		code=$(report "$T/known$r.eml" "known$r")
		[ "$code" = 200 ] || fail "$FS: report of the known campaign: HTTP $code: $(head -c 300 "$T/resp")"
	done
	KNOWN=$(campaign_in "$T/resp")
	known_copy 9 >"$T/copy.eml"
	KNOWN_VERDICT=$(verdict "$T/copy.eml")
	[ "${KNOWN_VERDICT%% *}" = "$KNOWN" ] && [ -n "$KNOWN" ] ||
		fail "$FS: a copy of the known campaign $KNOWN: verdict '$KNOWN_VERDICT'"
	echo "known campaign $KNOWN; a copy: $KNOWN_VERDICT"

	echo "== $FS a) the disk fills while reports come"
	local fill=$(($(free_bytes) - RESERVE - (64 << 10)))
	[ $fill -gt 0 ] && dd if=/dev/zero of="$M/filler" bs=64K count=$((fill >> 16)) status=none
	local refused= n
	for n in $(seq 1 4000); do
		random_message "$n" >"$T/r.eml"
		code=$(report "$T/r.eml" "r$n")
		if [ "$code" = 507 ]; then
			refused=$n
			break
		fi
		[ "$code" = 200 ] || { fail "$FS: report $n: HTTP $code: $(head -c 300 "$T/resp")"; break; }
		kill -0 "$NDD_PID" 2>/dev/null || { fail "$FS: serve died while the disk filled"; return; }
		# Reports take little space (the write-ahead log is
		# preallocated): the disk fills a little more meanwhile.
		if [ $((n % 10)) = 0 ] && [ "$(free_bytes)" -ge $RESERVE ]; then
			dd if=/dev/zero of="$M/filler2" bs=16K count=1 oflag=append conv=notrunc status=none
		fi
	done
	if [ -n "$refused" ] && grep -q "disk nearly full" "$T/resp"; then
		pass "$FS: report $refused refused with 507: $(head -c 160 "$T/resp")"
	else
		fail "$FS: no report refused with 507 'disk nearly full' after $n reports ($(free_bytes) bytes free)"
	fi
	for _ in $(seq 40); do
		[ "$(metric nddmilter_store_disk_full)" = 1 ] && break
		sleep 0.5
	done
	[ "$(metric nddmilter_store_disk_full)" = 1 ] && pass "$FS: nddmilter_store_disk_full 1" ||
		fail "$FS: nddmilter_store_disk_full is not 1"
	milter_answers && pass "$FS: the milter answers on the full disk" || fail "$FS: the milter does not answer on the full disk: $(tail -3 "$T/flood")"
	free_disk
	local ok=
	for n in $(seq 40); do
		random_message "live$n" >"$T/r.eml"
		code=$(report "$T/r.eml" "live$n")
		[ "$code" = 200 ] && { ok=1; break; }
		sleep 0.5
	done
	[ -n "$ok" ] && pass "$FS: space freed: reports accepted again (live)" ||
		fail "$FS: space freed: reports still refused (HTTP $code: $(head -c 200 "$T/resp"))"

	echo "== $FS b) another process fills the disk; SIGTERM"
	random_message acked1 >"$T/acked1.eml"
	code=$(report "$T/acked1.eml" acked1)
	[ "$code" = 200 ] || fail "$FS: report before the fill: HTTP $code"
	local acked1
	acked1=$(campaign_in "$T/resp")
	fill_disk
	sleep 1.5 # past any cached measurement of the free space
	random_message full >"$T/r.eml"
	code=$(report "$T/r.eml" full)
	[ "$code" = 507 ] && pass "$FS: disk filled by dd: report refused with 507" ||
		fail "$FS: disk filled by dd: report answered HTTP $code: $(head -c 200 "$T/resp")"
	stop_term "full disk"
	grep -q "SIGBUS" "$LOG" && fail "$FS: SIGBUS in the log: $(grep -m1 -A12 SIGBUS "$LOG" | grep -m1 badger)"

	echo "== $FS c) store verify on the full disk"
	local status=0
	"$NDD" store verify --store "$M/store" >"$T/verify" 2>&1 || status=$?
	[ $status -lt 128 ] && pass "$FS: store verify on the full disk: exit $status, no crash" ||
		fail "$FS: store verify died with signal $((status - 128))"

	echo "== $FS d) restart on the full disk"
	if expect_read_only "restart after SIGTERM"; then
		expect_acked "read-only" "$T/acked1.eml" "$acked1"
		milter_answers && pass "$FS: the milter answers after a read-only start" || fail "$FS: the milter does not answer after a read-only start"
		stop_term "read-only"
	fi

	echo "== $FS e) space freed; restart"
	free_disk
	if start_daemon; then
		random_message after >"$T/r.eml"
		code=$(report "$T/r.eml" after)
		[ "$code" = 200 ] && pass "$FS: space freed, after a restart: reports accepted" ||
			fail "$FS: space freed, after a restart: HTTP $code: $(head -c 200 "$T/resp")"
		expect_acked "after the restart" "$T/acked1.eml" "$acked1"
	else
		fail "$FS: serve did not start once space was freed (status $START_STATUS)"
	fi

	echo "== $FS f) kill -9, the disk filled, restart"
	local acked2=
	if [ -n "$NDD_PID" ]; then
		random_message acked2 >"$T/acked2.eml"
		code=$(report "$T/acked2.eml" acked2)
		[ "$code" = 200 ] || fail "$FS: report before kill -9: HTTP $code"
		acked2=$(campaign_in "$T/resp")
		# A report right after another process filled the disk: the
		# write-ahead log needs no new block, the guard measures.
		fill_disk
		random_message race >"$T/r.eml"
		code=$(report "$T/r.eml" race)
		if kill -0 "$NDD_PID" 2>/dev/null && { [ "$code" = 507 ] || [ "$code" = 200 ]; }; then
			pass "$FS: a report right after dd filled the disk: HTTP $code, serve alive"
		else
			fail "$FS: a report right after dd filled the disk: HTTP $code, serve $(kill -0 "$NDD_PID" 2>/dev/null && echo alive || echo dead)"
		fi
		kill -KILL "$NDD_PID"
		wait "$NDD_PID" 2>/dev/null
		NDD_PID=
	else
		fill_disk
	fi
	if expect_read_only "restart after kill -9"; then
		expect_acked "read-only after kill -9" "$T/acked2.eml" "$acked2"
		stop_term "read-only after kill -9"
	fi
	free_disk
	if start_daemon; then
		random_message final >"$T/r.eml"
		code=$(report "$T/r.eml" final)
		[ "$code" = 200 ] && pass "$FS: space freed after kill -9, after a restart: reports accepted" ||
			fail "$FS: space freed after kill -9: HTTP $code"
		expect_acked "after kill -9 and a restart" "$T/acked2.eml" "$acked2"
		expect_acked "after kill -9 and a restart" "$T/acked1.eml" "$acked1"
		stop_term "space freed"
	else
		fail "$FS: serve did not start once space was freed after kill -9 (status $START_STATUS)"
	fi
	grep -q "SIGBUS" "$LOG" && fail "$FS: SIGBUS in the log"
	return 0
}

# tmpfs
if mount -t tmpfs -o size=256m nddmilter-diskfull "$M"; then
	scenario tmpfs
	unmount_fs
else
	fail "cannot mount a tmpfs as root"
fi

# ext4 on a loop device
truncate -s 300M "$T/ext4.img"
mkfs.ext4 -q -F "$T/ext4.img" || die "mkfs.ext4 failed"
if LOOP=$(losetup -f --show "$T/ext4.img" 2>"$T/losetup.err"); then
	if mount -t ext4 "$LOOP" "$M"; then
		scenario ext4
	else
		fail "cannot mount $LOOP (ext4)"
	fi
	unmount_fs
else
	LOOP=
	echo "SKIP: ext4: no loop device can be set up here ($(head -c 200 "$T/losetup.err")): only the tmpfs was tested"
fi
rm -f "$T/ext4.img"
