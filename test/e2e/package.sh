#!/usr/bin/env bash
# End-to-end test of the Debian package, as an administrator would use it.
#
# Builds the package twice (scripts/build-package.sh: the two must be
# byte-identical), installs it with dpkg -i on this machine, and proves:
#   a) the package made the system user nddmilter, its store
#      /var/lib/nddmilter (nddmilter, 0700), the configuration
#      /etc/nddmilter/nddmilter.yaml (a conffile, 0640 root:nddmilter, with
#      store.dir /var/lib/nddmilter), the unit (User=nddmilter, no --store;
#      systemd-analyze verify when present), man pages and completions;
#   b) the installed daemon runs as nddmilter with the packaged
#      configuration, as the unit's ExecStart does (systemd cannot run
#      here: ports overridden with --listen/--http, on loopback);
#   c) `nddmilter --config /etc/nddmilter/nddmilter.yaml report` and
#      `campaigns list` run as root from another directory reach that
#      daemon through the configuration alone: its reports counter and
#      campaign list see the reports, and no stray ./nddmilter-data appears
#      (issue 16, items 1 and 2); with the daemon stopped, root is refused
#      the nddmilter-owned store, and the nddmilter user reads it directly;
#      installing the package again (an upgrade) keeps store and config;
#   d) test/e2e/postfix.sh passes with the installed binary run as the
#      package's user against a real Postfix (smaller load step);
#   e) the CLI without --config finds the installed configuration; a
#      backup written by root restores as the service user (from standard
#      input; from the file, the error says how);
#   f) without systemd: postinst says the daemon was not started;
#      /etc/init.d/nddmilter starts it as nddmilter and stops it; SIGTERM
#      ends it even after its store was deleted under it; dpkg -r stops a
#      running daemon and says so;
#   g) dpkg --purge leaves no nddmilter process, binary, store or
#      configuration behind.
# Needs root (dpkg, users); installs what postfix.sh needs. Removes any
# nddmilter package installed before it (a CI machine). Bounded in time;
# prints "N passed, N failed" and exits non-zero on failure.
# Environment: NDD_E2E_TIMEOUT (seconds, default 600).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export PATH=$PATH:/usr/local/go/bin:/usr/sbin:/sbin
TIME_LIMIT=${NDD_E2E_TIMEOUT:-600}
CONF=/etc/nddmilter/nddmilter.yaml

. "$ROOT/test/e2e/lib.sh"

skip_unless_root "the package test needs root (dpkg -i, the package's user)"
command -v dpkg >/dev/null || { echo "SKIP: no dpkg here"; echo "0 passed, 0 failed"; exit 0; }
install_commands curl

# The package's daemon listens on the default ports: another process there
# would answer for it, and the installed daemon could not bind.
for port in 8898 8899; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		echo "FAIL: 127.0.0.1:$port is already in use (the packaged daemon's default): stop what listens there ($(ss -ltnpH "sport = :$port" 2>/dev/null | head -1))"
		echo "0 passed, 1 failed"
		exit 1
	fi
done

T=$(mktemp -d /tmp/ndd-pkg.XXXXXX)
chmod 755 "$T"
NDD_PID=
cleanup() {
	local rc=$?
	stop_watchdog
	[ -n "$NDD_PID" ] && kill -TERM "$NDD_PID" 2>/dev/null && wait "$NDD_PID" 2>/dev/null
	if dpkg -s nddmilter >/dev/null 2>&1; then
		dpkg --purge nddmilter >>"$T/dpkg.log" 2>&1
	fi
	if [ "$failed" -gt 0 ] || [ "$rc" -ne 0 ]; then
		echo "--- nddmilter log (tail)"; tail -20 "$T/nddmilter.log" 2>/dev/null
		echo "--- dpkg log (tail)"; tail -20 "$T/dpkg.log" 2>/dev/null
	fi
	rm -rf "$T"
	summary_exit "$rc"
}
trap cleanup EXIT
start_watchdog

# --- build, twice: reproducible ----------------------------------------------
echo "== building the package (twice)"
OUT=$T/dist1 PACKAGERS=deb bash "$ROOT/scripts/build-package.sh" >"$T/build1.log" 2>&1 || { cat "$T/build1.log"; die "build-package.sh failed"; }
OUT=$T/dist2 PACKAGERS=deb bash "$ROOT/scripts/build-package.sh" >"$T/build2.log" 2>&1 || { cat "$T/build2.log"; die "build-package.sh failed (2nd)"; }
DEB=$(ls "$T"/dist1/*.deb)
if cmp -s "$DEB" "$T/dist2/$(basename "$DEB")"; then
	pass "two builds are byte-identical: $(basename "$DEB") $(sha256sum <"$DEB" | cut -c1-16)…"
else
	fail "two builds of the same commit differ"
fi

# --- install --------------------------------------------------------------------
if dpkg -s nddmilter >/dev/null 2>&1; then
	echo "== removing the nddmilter package installed before"
	dpkg --purge nddmilter >>"$T/dpkg.log" 2>&1
fi
dpkg -i "$DEB" >"$T/install.log" 2>&1 || die "dpkg -i failed: $(tail -5 "$T/install.log")"
cat "$T/install.log" >>"$T/dpkg.log"
pass "dpkg -i $(basename "$DEB")"
if [ ! -d /run/systemd/system ]; then
	grep -q 'the daemon was NOT started' "$T/install.log" &&
		pass "(f) without systemd, postinst says: $(grep -m1 'NOT started' "$T/install.log")" ||
		fail "(f) postinst said nothing about starting: $(tail -3 "$T/install.log")"
fi

# (a) what the package installed.
check_stat() { # path expected-"%U:%G %a"
	local got
	got=$(stat -c '%U:%G %a' "$1" 2>&1)
	[ "$got" = "$2" ] && pass "(a) $1: $got" || fail "(a) $1: $got, want $2"
}
id nddmilter >/dev/null 2>&1 && pass "(a) system user: $(id nddmilter)" || fail "(a) no user nddmilter"
[ "$(getent passwd nddmilter | cut -d: -f7)" = /usr/sbin/nologin ] || fail "(a) nddmilter's shell is not nologin"
check_stat /var/lib/nddmilter "nddmilter:nddmilter 700"
check_stat "$CONF" "root:nddmilter 640"
grep -qx /etc/nddmilter/nddmilter.yaml /var/lib/dpkg/info/nddmilter.conffiles && pass "(a) $CONF is a conffile" || fail "(a) $CONF is not a conffile"
grep -q '^License: Apache-2.0' /usr/share/doc/nddmilter/copyright 2>/dev/null && grep -q 'Apache License' /usr/share/doc/nddmilter/LICENSE &&
	pass "(a) /usr/share/doc/nddmilter/copyright (Apache-2.0) and LICENSE" || fail "(a) no Apache-2.0 copyright file or LICENSE in /usr/share/doc/nddmilter"
grep -q '^  dir: /var/lib/nddmilter$' "$CONF" && pass "(a) packaged store.dir: /var/lib/nddmilter" || fail "(a) packaged store.dir: $(grep -A2 '^store:' "$CONF" | grep dir:)"
want="nddmilter $(cd "$ROOT" && git describe --tags --always --dirty)"
version=$(/usr/bin/nddmilter version 2>&1)
if [ "$(echo "$version" | head -1)" = "$want" ] &&
	echo "$version" | grep -q "^commit *$(cd "$ROOT" && git rev-parse HEAD)$"; then
	pass "(a) nddmilter version: $want (set by build-package.sh with -ldflags)"
else
	fail "(a) nddmilter version: $(echo "$version" | head -2 | tr '\n' ' '), want $want"
fi
if /usr/bin/nddmilter config check "$CONF" >"$T/check.log" 2>&1 && grep -q '^  dir: /var/lib/nddmilter$' "$T/check.log"; then
	pass "(a) nddmilter config check $CONF: OK, store.dir /var/lib/nddmilter"
else
	fail "(a) nddmilter config check $CONF: $(head -3 "$T/check.log")"
fi
UNIT=/usr/lib/systemd/system/nddmilter.service
if grep -q '^User=nddmilter$' "$UNIT" && ! grep -q '^DynamicUser' "$UNIT" && grep -q '^ExecStart=/usr/bin/nddmilter serve --config /etc/nddmilter/nddmilter.yaml$' "$UNIT"; then
	pass "(a) unit: User=nddmilter, $(grep ^ExecStart= "$UNIT")"
else
	fail "(a) unit: $(grep -E '^(User|DynamicUser|ExecStart)=' "$UNIT" | tr '\n' ' ')"
fi
if command -v systemd-analyze >/dev/null; then
	if systemd-analyze verify "$UNIT" >"$T/verify.log" 2>&1; then
		pass "(a) systemd-analyze verify $UNIT"
	else
		fail "(a) systemd-analyze verify: $(cat "$T/verify.log")"
	fi
fi
if [ -f /usr/share/man/man1/nddmilter-serve.1.gz ] && [ -f /usr/share/man/man1/nddmilter-pipe.1.gz ] && zcat /usr/share/man/man1/nddmilter-report.1.gz | grep -q -- '--reporter' &&
	[ -s /usr/share/bash-completion/completions/nddmilter ] && [ -s /usr/share/zsh/vendor-completions/_nddmilter ] &&
	[ -s /usr/share/doc/nddmilter/README.md ] && [ -s /usr/share/doc/nddmilter/monitoring/nddmilter.json ] &&
	[ -s /usr/share/doc/nddmilter/monitoring/nddmilter-alerts.yml ]; then
	pass "(a) man pages ($(ls /usr/share/man/man1/nddmilter*.1.gz | wc -l)), bash/zsh/fish completions, /usr/share/doc/nddmilter (monitoring/: the Grafana dashboard and the alerting rules)"
else
	fail "(a) man pages, completions or docs missing"
fi
bash -c 'source /usr/share/bash-completion/completions/nddmilter && declare -F __start_nddmilter' >/dev/null 2>&1 &&
	pass "(a) bash completion loads" || fail "(a) bash completion does not load"

# (b) the daemon as the unit runs it: user nddmilter, the packaged
# configuration; only the ports differ (free loopback ports).
free_port; MILTER_PORT=$PORT
free_port; HTTP_PORT=$PORT
setpriv --reuid=nddmilter --regid=nddmilter --init-groups -- \
	/usr/bin/nddmilter serve --config "$CONF" --listen "inet:127.0.0.1:$MILTER_PORT" --http "127.0.0.1:$HTTP_PORT" \
	>"$T/nddmilter.log" 2>&1 &
NDD_PID=$!
ready=
for _ in $(seq 150); do
	curl -sf "http://127.0.0.1:$HTTP_PORT/readyz" >/dev/null 2>&1 && { ready=1; break; }
	kill -0 $NDD_PID 2>/dev/null || break
	sleep 0.1
done
[ -n "$ready" ] || die "the installed daemon (user nddmilter, $CONF) did not become ready: $(tail -3 "$T/nddmilter.log")"
pass "(b) /usr/bin/nddmilter serve --config $CONF runs as $(ps -o user= -p $NDD_PID) and is ready"
[ -s /var/lib/nddmilter/api-token ] && [ "$(stat -c %U /var/lib/nddmilter/api-token)" = nddmilter ] &&
	pass "(b) API token and address recorded in /var/lib/nddmilter" || fail "(b) no API token in /var/lib/nddmilter"

# (c) the administrator's commands find the store and the daemon from the
# configuration alone, run from an unrelated directory.
mkdir -p "$T/cwd"
cd "$T/cwd" || die "cd"
TEXT="Dear friend, we are pleased to announce that your account has been selected
for an exclusive investment opportunity with guaranteed monthly returns. Our
financial advisors have prepared a personal portfolio proposal for you. Please
confirm your participation by visiting our secure website and entering your
banking details before the offer expires at the end of this week. Thousands of
satisfied customers have already doubled their savings with our program."
for u in alice bob; do
	printf 'From: offers@invest.example\nTo: %s@example.org\nSubject: Exclusive investment opportunity\n\n%s\nReference %s.\n' \
		"$u" "$TEXT" "$RANDOM" >"$T/$u.eml"
	/usr/bin/nddmilter --config "$CONF" report --reporter "$u" "$T/$u.eml" >"$T/report-$u.log" 2>&1 ||
		fail "(c) nddmilter --config $CONF report: $(cat "$T/report-$u.log")"
done
curl -s "http://127.0.0.1:$HTTP_PORT/metrics" >"$T/metrics.txt"
if grep -q '^nddmilter_reports_total{kind="spam"} 2$' "$T/metrics.txt"; then
	pass "(c) report --config $CONF went to the daemon: nddmilter_reports_total{kind=\"spam\"} 2"
else
	fail "(c) the daemon did not count the reports: $(grep '^nddmilter_reports_total' "$T/metrics.txt" | tr '\n' ' ') — $(cat "$T/report-alice.log")"
fi
if /usr/bin/nddmilter --config "$CONF" campaigns list >"$T/list.log" 2>&1 && grep -q 'Exclusive investment' "$T/list.log"; then
	pass "(c) campaigns list --config $CONF sees the campaign"
else
	fail "(c) campaigns list --config $CONF: $(cat "$T/list.log")"
fi
# (e) without --config, the commands use the installed configuration.
if /usr/bin/nddmilter report --reporter dave "$T/alice.eml" >"$T/report-noconf.log" 2>&1 &&
	/usr/bin/nddmilter campaigns list >"$T/list-noconf.log" 2>&1 && grep -q 'Exclusive investment' "$T/list-noconf.log" &&
	curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | grep -q '^nddmilter_reports_total{kind="spam"} 3$'; then
	pass "(e) report and campaigns list without --config reach the daemon of $CONF"
else
	fail "(e) without --config: $(cat "$T/report-noconf.log" "$T/list-noconf.log" | head -4)"
fi
# (e) a backup as root, through the running daemon's API.
if /usr/bin/nddmilter store backup "$T/backup.bak" >"$T/backup.log" 2>&1 && [ -s "$T/backup.bak" ]; then
	pass "(e) store backup as root: $(stat -c '%U %a %s bytes' "$T/backup.bak")"
else
	fail "(e) store backup as root: $(cat "$T/backup.log")"
fi
[ -e "$T/cwd/nddmilter-data" ] && fail "(c) a stray ./nddmilter-data was created" || pass "(c) no stray ./nddmilter-data"
cd "$ROOT" || die "cd"
kill -TERM $NDD_PID
wait $NDD_PID && pass "(b) the installed daemon stopped cleanly on SIGTERM" || fail "(b) exit status $? on SIGTERM"
NDD_PID=
# With the daemon stopped, root must not write into nddmilter's store
# (files it made would lock the daemon out); as nddmilter the CLI works.
if /usr/bin/nddmilter --config "$CONF" report --reporter carol "$T/alice.eml" >"$T/report-root.log" 2>&1; then
	fail "(c) root reported into nddmilter's store with the daemon stopped"
elif grep -q 'belongs to user nddmilter' "$T/report-root.log"; then
	pass "(c) root without the daemon is refused: $(cut -c1-90 "$T/report-root.log")…"
else
	fail "(c) root without the daemon: $(cat "$T/report-root.log")"
fi
notmine=$(find /var/lib/nddmilter ! -user nddmilter | head -3)
[ -z "$notmine" ] && pass "(c) every file in /var/lib/nddmilter belongs to nddmilter" || fail "(c) files not owned by nddmilter: $notmine"
if runuser -u nddmilter -- /usr/bin/nddmilter --config "$CONF" campaigns list >"$T/list2.log" 2>&1 && grep -q 'Exclusive investment' "$T/list2.log"; then
	pass "(c) runuser -u nddmilter -- nddmilter --config $CONF campaigns list: the store, directly"
else
	fail "(c) campaigns list as nddmilter: $(cat "$T/list2.log")"
fi

# (e) root's backup restored by the service user: from the file the error
# names the way (standard input), from standard input it works.
RESTORED=/var/lib/nddmilter/restored
runuser -u nddmilter -- /usr/bin/nddmilter store restore --store "$RESTORED" "$T/backup.bak" >"$T/restore1.log" 2>&1
if grep -q 'give it on standard input' "$T/restore1.log"; then
	pass "(e) restore of root's 0600 backup from its path: $(grep -m1 'standard input' "$T/restore1.log" | cut -c1-100)…"
else
	fail "(e) restore from the path: $(cat "$T/restore1.log")"
fi
if runuser -u nddmilter -- /usr/bin/nddmilter store restore --store "$RESTORED" - <"$T/backup.bak" >"$T/restore2.log" 2>&1 &&
	runuser -u nddmilter -- /usr/bin/nddmilter --store "$RESTORED" campaigns list 2>&1 | grep -q 'Exclusive investment'; then
	pass "(e) runuser -u nddmilter -- nddmilter store restore - < backup: $(cat "$T/restore2.log")"
else
	fail "(e) restore from standard input: $(cat "$T/restore2.log")"
fi
rm -rf "$RESTORED"

# An upgrade (the same package again) keeps the store and the
# configuration's owner and mode.
dpkg -i "$DEB" >>"$T/dpkg.log" 2>&1 || fail "(c) dpkg -i over the installed package: $(tail -3 "$T/dpkg.log")"
if [ "$(stat -c '%U:%G %a' "$CONF")" = "root:nddmilter 640" ] &&
	runuser -u nddmilter -- /usr/bin/nddmilter --config "$CONF" campaigns list 2>&1 | grep -q 'Exclusive investment'; then
	pass "(c) dpkg -i again (upgrade): store and configuration kept (root:nddmilter 640)"
else
	fail "(c) upgrade: $(stat -c '%U:%G %a' "$CONF"), campaigns: $(runuser -u nddmilter -- /usr/bin/nddmilter --config "$CONF" campaigns list 2>&1 | head -2)"
fi

# (d) the installed binary, as the package's user, against a real Postfix.
echo "== test/e2e/postfix.sh with /usr/bin/nddmilter as user nddmilter"
if NDD_BIN=/usr/bin/nddmilter NDD_E2E_USER=nddmilter NDD_E2E_LOAD=${NDD_E2E_LOAD:-100} bash "$ROOT/test/e2e/postfix.sh" >"$T/postfix-e2e.log" 2>&1; then
	pass "(d) postfix.sh with the installed binary as nddmilter: $(tail -1 "$T/postfix-e2e.log")"
else
	fail "(d) postfix.sh with the installed binary: $(tail -1 "$T/postfix-e2e.log")"
	grep -E '^(FAIL|FATAL)' "$T/postfix-e2e.log"
fi

# (f) without systemd: the package's init script.
installed_pids() { # the processes running the installed binary
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/exe" 2>/dev/null)" = /usr/bin/nddmilter ] && echo "${p#/proc/}"
	done
}
wait_ready() { # URL: up to 15 s
	for _ in $(seq 150); do
		curl -sf "$1" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}
PKG_HTTP=$(sed -n '/^http:/,/^[a-z]/s/^  listen: //p' "$CONF" | head -1)
if /etc/init.d/nddmilter start >"$T/init.log" 2>&1 && wait_ready "http://$PKG_HTTP/readyz" &&
	[ "$(ps -o user= -p "$(cat /run/nddmilter.pid)")" = nddmilter ]; then
	pass "(f) /etc/init.d/nddmilter start: ready at $PKG_HTTP as nddmilter ($(cat "$T/init.log"))"
else
	fail "(f) /etc/init.d/nddmilter start: $(cat "$T/init.log") $(tail -3 /var/log/nddmilter.log 2>/dev/null)"
fi
/etc/init.d/nddmilter status >/dev/null && pass "(f) init script status: running" || fail "(f) init script status: not running"
if /etc/init.d/nddmilter stop >"$T/init.log" 2>&1 && [ -z "$(installed_pids)" ]; then
	pass "(f) /etc/init.d/nddmilter stop: $(cat "$T/init.log"), no process left"
else
	fail "(f) /etc/init.d/nddmilter stop: $(cat "$T/init.log"); left: $(installed_pids)"
fi
# SIGTERM after the store was deleted under the daemon (as a purge does).
/etc/init.d/nddmilter start >"$T/init.log" 2>&1 && wait_ready "http://$PKG_HTTP/readyz" || fail "(f) second start: $(cat "$T/init.log")"
pid=$(cat /run/nddmilter.pid 2>/dev/null)
/usr/bin/nddmilter report --reporter erin "$T/alice.eml" >/dev/null 2>&1
rm -rf /var/lib/nddmilter
start=$(date +%s)
kill -TERM "$pid"
for _ in $(seq 450); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
took=$(($(date +%s) - start))
if kill -0 "$pid" 2>/dev/null; then
	fail "(f) SIGTERM after the store was deleted: still running after ${took} s"
	kill -KILL "$pid"
else
	pass "(f) SIGTERM after the store was deleted: exited in ${took} s ($(grep -m1 'close store' /var/log/nddmilter.log | cut -c1-120))"
fi
rm -f /run/nddmilter.pid
install -d -o nddmilter -g nddmilter -m 0700 /var/lib/nddmilter
# dpkg -r stops a running daemon and says so.
/etc/init.d/nddmilter start >"$T/init.log" 2>&1 && wait_ready "http://$PKG_HTTP/readyz" || fail "(f) third start: $(cat "$T/init.log")"
dpkg -r nddmilter >"$T/remove.log" 2>&1 || fail "(f) dpkg -r: $(tail -3 "$T/remove.log")"
cat "$T/remove.log" >>"$T/dpkg.log"
if [ -z "$(installed_pids)" ] && ! pgrep -u nddmilter >/dev/null 2>&1 && grep -q 'nddmilter: stopped' "$T/remove.log"; then
	pass "(f) dpkg -r stopped the daemon: $(grep -m1 'nddmilter: stopped' "$T/remove.log")"
else
	fail "(f) after dpkg -r: processes $(installed_pids) $(pgrep -u nddmilter -a); dpkg said: $(tail -3 "$T/remove.log"); the daemon's log: $(tail -5 /var/log/nddmilter.log 2>/dev/null)"
fi

# (g) purge: nothing left running or installed.
dpkg --purge nddmilter >>"$T/dpkg.log" 2>&1 || fail "(g) dpkg --purge: $(tail -3 "$T/dpkg.log")"
left=
pgrep -u nddmilter >/dev/null 2>&1 && left="$left processes of nddmilter: $(pgrep -u nddmilter -a);"
# Processes of the installed binary (others on a shared machine run their
# own builds of nddmilter: not those).
for p in /proc/[0-9]*; do
	case "$(readlink "$p/exe" 2>/dev/null)" in
	/usr/bin/nddmilter*) left="$left process ${p#/proc/} of /usr/bin/nddmilter;" ;;
	esac
done
for f in /usr/bin/nddmilter /etc/nddmilter /var/lib/nddmilter "$UNIT"; do
	[ -e "$f" ] && left="$left $f;"
done
for f in /etc/init.d/nddmilter /var/log/nddmilter.log; do
	[ -e "$f" ] && left="$left $f;"
done
[ -z "$left" ] && pass "(g) dpkg --purge: no process, binary, configuration, store, unit or init script left" || fail "(g) after purge:$left"
