#!/usr/bin/env bash
# End-to-end test: nddmilter attached to a real Sendmail with the contrib
# snippet contrib/sendmail/nddmilter.mc.
#
# Sendmail 8.17 from Debian's packages (sendmail-bin, sendmail-cf,
# sendmail-base and two libraries, fetched with apt-get download and
# unpacked in a temp dir: installing sendmail-bin would remove Postfix),
# a private sendmail.cf built with m4 from sendmail-cf's cf.m4 plus the
# contrib snippet (its port replaced by a free one), run in the foreground
# on loopback inside a private mount namespace (unshare -m) whose /dev/log
# is a small listener writing to a file and whose /etc/hosts names a
# qualified host; Postfix's smtp-sink is the relay target. Proves:
#   a) a normal message is delivered with the X-NDD-Verdict header, over
#      milter protocol 6 with no reply before end of message;
#   b) after reports through the HTTP API, a randomized copy of the
#      campaign is rejected with the 550 text naming the campaign; after a
#      SIGHUP with policy.max_action: quarantine, a copy is held in
#      Sendmail's quarantine (mailq -qQ);
#   c) with nddmilter stopped and the snippet's F= (empty), mail is
#      accepted unfiltered; with F=T, it is deferred (451 4.3.2).
# Installs postfix (for smtp-sink), swaks and m4 from Debian's packages
# when missing (root). Cleans up, bounded in time; prints "N passed, N
# failed" and exits non-zero on failure.
# Environment: NDD_E2E_TIMEOUT (seconds, default 240), NDD_BIN (a built
# nddmilter instead of building one), NDD_E2E_KEEP (a folder for the logs).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export PATH=$PATH:/usr/local/go/bin:/usr/sbin:/sbin
TIME_LIMIT=${NDD_E2E_TIMEOUT:-240}
. "$ROOT/test/e2e/lib.sh"

# --- prerequisites -----------------------------------------------------------
skip_unless_root "the Sendmail end-to-end test needs root (mount namespace, queue)"
install_postfix
install_commands m4
install_commands curl
for c in smtp-sink swaks m4 curl unshare python3 apt-get dpkg-deb; do
	command -v $c >/dev/null || die "missing command: $c"
done

T=$(mktemp -d /tmp/ndd-sm.XXXXXX)
chmod 755 "$T"
NDD_PID=
SINK_PID=
SM_PID=
LOG_PID=
stop_sendmail() {
	[ -n "$SM_PID" ] && kill -TERM "$SM_PID" 2>/dev/null && wait "$SM_PID" 2>/dev/null
	SM_PID=
	for _ in $(seq 50); do
		(exec 3<>/dev/tcp/127.0.0.1/$SMTP_PORT) 2>/dev/null || return 0
		sleep 0.1
	done
	echo "sendmail still listens on $SMTP_PORT"
}
cleanup() {
	local rc=$?
	stop_watchdog
	stop_sendmail
	[ -n "$NDD_PID" ] && kill -TERM "$NDD_PID" 2>/dev/null && wait "$NDD_PID" 2>/dev/null
	[ -n "$SINK_PID" ] && kill "$SINK_PID" 2>/dev/null && wait "$SINK_PID" 2>/dev/null
	[ -n "$LOG_PID" ] && kill "$LOG_PID" 2>/dev/null && wait "$LOG_PID" 2>/dev/null
	if [ "$failed" -gt 0 ] || [ "$rc" -ne 0 ]; then
		echo "--- nddmilter log (tail)"; tail -20 "$T/nddmilter.log" 2>/dev/null
		echo "--- sendmail log (tail)"; tail -30 "$T/syslog.log" 2>/dev/null
	fi
	keep_logs '*.log' '*.mc'
	rm -rf "$T"
	summary_exit "$rc"
}
trap cleanup EXIT
start_watchdog

free_port; SMTP_PORT=$PORT
free_port; SINK_PORT=$PORT
free_port; MILTER_PORT=$PORT
free_port; HTTP_PORT=$PORT
TOKEN=e2e-token-$RANDOM$RANDOM$RANDOM$RANDOM$RANDOM$RANDOM # serve wants 16 characters or more

# --- Sendmail from Debian's packages, unpacked -------------------------------
echo "== fetching sendmail-bin and friends (apt-get download)"
mkdir -p "$T/debs" "$T/sm"
(cd "$T/debs" && apt-get download sendmail-bin sendmail-cf sendmail-base liblockfile1 libwrap0 >"$T/download.log" 2>&1) ||
	{ apt-get update >/dev/null 2>&1; (cd "$T/debs" && apt-get download sendmail-bin sendmail-cf sendmail-base liblockfile1 libwrap0 >"$T/download.log" 2>&1); } ||
	die "apt-get download: $(tail -3 "$T/download.log")"
for d in "$T"/debs/*.deb; do dpkg-deb -x "$d" "$T/sm" || die "dpkg-deb -x $d"; done
# Without its setgid bit (cp drops it), so that LD_LIBRARY_PATH applies.
cp "$T/sm/usr/libexec/sendmail/sendmail" "$T/sendmail"
LIBS=$(dirname "$(find "$T/sm" -name 'liblockfile.so.1' | head -1)")
SM_VERSION=$(dpkg-deb -f "$(ls "$T"/debs/sendmail-bin_*.deb)" Version)

# --- nddmilter ----------------------------------------------------------------
if [ -n "${NDD_BIN:-}" ]; then
	cp "$NDD_BIN" "$T/nddmilter" || die "NDD_BIN: cannot copy $NDD_BIN"
else
	echo "== building nddmilter"
	(cd "$ROOT" && go build -o "$T/nddmilter" ./cmd/nddmilter) || die "go build failed"
fi
write_config() { # max_action
	cat >"$T/nddmilter.yaml" <<EOF2
milter:
  listen: inet:127.0.0.1:$MILTER_PORT
http:
  listen: 127.0.0.1:$HTTP_PORT
  token: $TOKEN
store:
  dir: $T/store
policy:
  max_action: $1
log:
  format: json
  level: debug
EOF2
}
write_config reject
"$T/nddmilter" serve --config "$T/nddmilter.yaml" >>"$T/nddmilter.log" 2>&1 &
NDD_PID=$!
ready=
for _ in $(seq 100); do
	curl -sf "http://127.0.0.1:$HTTP_PORT/readyz" >/dev/null 2>&1 && { ready=1; break; }
	kill -0 $NDD_PID 2>/dev/null || break
	sleep 0.1
done
[ -n "$ready" ] || die "nddmilter serve did not become ready: $(tail -3 "$T/nddmilter.log")"

# --- smtp-sink: the relay target ---------------------------------------------
mkdir -p "$T/sink"
chown postfix "$T/sink"
smtp-sink -u postfix -d "$T/sink/%M." -c 127.0.0.1:$SINK_PORT 100 >"$T/sink.log" 2>&1 &
SINK_PID=$!
wait_port $SINK_PORT 5 || die "smtp-sink did not start"

# --- syslog stand-in: Sendmail logs only to /dev/log -------------------------
mkdir -p "$T/dev"
python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "ab", 0) as f:
    while True:
        f.write(s.recv(65536).rstrip(b"\0\n") + b"\n")
' "$T/dev/log" "$T/syslog.log" &
LOG_PID=$!
for _ in $(seq 50); do [ -S "$T/dev/log" ] && break; sleep 0.1; done
[ -S "$T/dev/log" ] || die "syslog listener did not start"
for n in null zero random urandom tty; do touch "$T/dev/$n"; done
printf '127.0.0.1\tsm.test.local sm %s localhost\n' "$(hostname)" >"$T/hosts"
printf 'hosts\tfiles\naliases\tfiles\n' >"$T/service.switch"
touch "$T/aliases"
mkdir -p "$T/mqueue" "$T/clientmqueue"
chmod 700 "$T/mqueue"

# in_ns ARGS: the unpacked sendmail with the private .cf and ARGS, in a
# mount namespace of its own (private /dev with the log listener,
# /etc/hosts). It execs: call it in a subshell, `( in_ns … )`, or in the
# background, where $! is then Sendmail's own pid.
in_ns() {
	exec unshare -m sh -c '
		mount --make-rprivate / &&
		for n in null zero random urandom tty; do mount --bind /dev/$n "$1/dev/$n"; done &&
		mount --bind "$1/dev" /dev && mount --bind "$1/hosts" /etc/hosts &&
		T=$1 L=$2 && shift 2 &&
		exec env LD_LIBRARY_PATH="$L" "$T/sendmail" -C "$T/e2e.cf" "$@"' sh "$T" "$LIBS" "$@"
}

# --- sendmail.cf from cf.m4 + contrib/sendmail/nddmilter.mc --------------------
start_sendmail() { # F-flag: "" (the snippet as shipped) or T
	stop_sendmail
	sed -e "s/S=inet:8899@127.0.0.1/S=inet:$MILTER_PORT@127.0.0.1/" \
		-e "s/F=, /F=$1, /" "$ROOT/contrib/sendmail/nddmilter.mc" >"$T/nddmilter.mc"
	grep -q "S=inet:$MILTER_PORT@127.0.0.1, F=$1, " "$T/nddmilter.mc" ||
		die "contrib/sendmail/nddmilter.mc: its S=/F= line is not as expected"
	cat >"$T/e2e.mc" <<EOF2
divert(-1)
divert(0)dnl
include(\`$T/sm/usr/share/sendmail/cf/m4/cf.m4')dnl
VERSIONID(\`nddmilter end-to-end test')dnl
OSTYPE(\`linux')dnl
define(\`confDOMAIN_NAME', \`sm.test.local')dnl
define(\`QUEUE_DIR', \`$T/mqueue')dnl
define(\`MSP_QUEUE_DIR', \`$T/clientmqueue')dnl
define(\`STATUS_FILE', \`$T/statistics')dnl
define(\`confPID_FILE', \`$T/sendmail.pid')dnl
define(\`ALIAS_FILE', \`$T/aliases')dnl
define(\`confSERVICE_SWITCH_FILE', \`$T/service.switch')dnl
define(\`confHOSTS_FILE', \`$T/hosts')dnl
define(\`confDONT_PROBE_INTERFACES', \`True')dnl
define(\`confDELIVERY_MODE', \`background')dnl
define(\`confLOG_LEVEL', \`14')dnl
define(\`confMILTER_LOG_LEVEL', \`14')dnl
define(\`SMART_HOST', \`relay:[127.0.0.1]')dnl
define(\`RELAY_MAILER_ARGS', \`TCP \$h $SINK_PORT')dnl
FEATURE(\`no_default_msa')dnl   (no port 587 on every address: loopback only)
FEATURE(\`nocanonify')dnl
FEATURE(\`accept_unresolvable_domains')dnl
FEATURE(\`accept_unqualified_senders')dnl
DAEMON_OPTIONS(\`Port=$SMTP_PORT, Addr=127.0.0.1, Name=MTA')dnl
dnl --- the contrib snippet, as an administrator adds it to sendmail.mc
include(\`$T/nddmilter.mc')dnl
MAILER(\`local')dnl
MAILER(\`smtp')dnl
EOF2
	m4 "$T/e2e.mc" >"$T/e2e.cf" 2>"$T/m4.log" || die "m4: $(cat "$T/m4.log")"
	[ -s "$T/m4.log" ] && die "m4 warnings: $(cat "$T/m4.log")"
	grep -q "^Xnddmilter, S=inet:$MILTER_PORT@127.0.0.1" "$T/e2e.cf" || die "no Xnddmilter line in the built sendmail.cf"
	in_ns -bD -L sm-e2e >>"$T/sendmail-fg.log" 2>&1 &
	SM_PID=$!
	sleep 0.2
	kill -0 "$SM_PID" 2>/dev/null || die "sendmail exited: $(tail -5 "$T/sendmail-fg.log") $(tail -5 "$T/syslog.log")"
	wait_port $SMTP_PORT 20 || die "sendmail did not start: $(tail -5 "$T/sendmail-fg.log") $(tail -5 "$T/syslog.log")"
}
start_sendmail ""
pass "Sendmail $SM_VERSION runs on 127.0.0.1:$SMTP_PORT with contrib/sendmail/nddmilter.mc (milter on port $MILTER_PORT)"

# --- messages -----------------------------------------------------------------
CAMPAIGN_TEXT="Dear friend, we are pleased to announce that your account has been selected
for an exclusive investment opportunity with guaranteed monthly returns. Our
financial advisors have prepared a personal portfolio proposal for you. Please
confirm your participation by visiting our secure website and entering your
banking details before the offer expires at the end of this week. Thousands of
satisfied customers have already doubled their savings with our program.
Remember that this invitation is strictly personal and cannot be transferred.
Kind regards, the international investment department."
campaign_copy() { # n: a randomized copy
	local greet=(friend customer client member partner)
	printf '%s\n\nReference number %s.\n' "${CAMPAIGN_TEXT/friend/${greet[$(($1 % 5))]}}" "$((1000 + $1 * 7))"
}
send() { # name subject body; transcript in $T/swaks-NAME.log
	swaks --server 127.0.0.1:$SMTP_PORT --from sender@example.net --to user@example.org \
		--header "Subject: $2" --header "X-E2E-Test: $1" --body "$3" --timeout 30 >"$T/swaks-$1.log" 2>&1
}
sink_file() { # X-E2E-Test name -> file, waiting up to 20 s
	local f
	for _ in $(seq 200); do
		f=$(grep -l "^X-E2E-Test: $1\$" "$T"/sink/* 2>/dev/null | head -1)
		[ -n "$f" ] && { echo "$f"; return 0; }
		sleep 0.1
	done
	return 1
}

# (a) a normal message: delivered with the verdict header.
send normal "Lunch on Friday?" "Shall we meet at noon at the usual place? Bring the report."
if f=$(sink_file normal) && grep -q '^X-NDD-Verdict: accept; score=' "$f"; then
	pass "(a) normal message relayed with $(grep '^X-NDD-Verdict:' "$f" | cut -c1-40)…"
else
	fail "(a) normal message not delivered with a verdict"
	grep -E '^(<~?\*\*|<- *[0-9])' "$T/swaks-normal.log" | tail -3
fi
if grep '"msg":"milter connection negotiated"' "$T/nddmilter.log" | grep -q '"version":6,.*"streaming":true'; then
	pass "(a) Sendmail negotiated milter protocol 6, no reply before end of message"
else
	fail "(a) negotiation: $(grep 'negotiated' "$T/nddmilter.log" | head -1)"
fi
grep -q '"queue_id":"[A-Za-z0-9]\+"' "$T/nddmilter.log" &&
	pass "(a) the queue id (macro i of the snippet) names the message in nddmilter's log" ||
	fail "(a) no queue id in nddmilter's log line"

# (b) five users report the campaign; a randomized copy is rejected.
for i in 1 2 3 4 5; do
	printf 'From: offers@invest.example\nTo: u%s@example.org\nSubject: Exclusive investment opportunity\n\n%s\n' \
		"$i" "$(campaign_copy $i)" >"$T/report-$i.eml"
	code=$(curl -s -o "$T/report-$i.json" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
		--data-binary @"$T/report-$i.eml" "http://127.0.0.1:$HTTP_PORT/v1/reports?kind=spam&reporter=user$i")
	[ "$code" = 200 ] || fail "(b) report $i: HTTP $code $(cat "$T/report-$i.json")"
done
send copy "Exclusive investment opportunity" "$(campaign_copy 11)"
if grep -q '<\*\* *550 5.7.1 Message rejected as spam campaign [0-9]* (nddmilter)' "$T/swaks-copy.log"; then
	pass "(b) campaign copy rejected: $(grep -o '550 5.7.1 .*' "$T/swaks-copy.log" | head -1)"
else
	fail "(b) campaign copy not rejected with the 550 text"
	grep -E '^(<~?\*\*|<- *[0-9])' "$T/swaks-copy.log" | tail -3
fi

# (b) quarantine: after SIGHUP with policy.max_action: quarantine, a copy
# is accepted and held in Sendmail's queue (mailq -qQ lists it).
write_config quarantine
kill -HUP $NDD_PID
for _ in $(seq 50); do
	grep -q '"msg":"reloaded"' "$T/nddmilter.log" && break
	sleep 0.1
done
send held "Exclusive investment opportunity" "$(campaign_copy 12)"
held=
for _ in $(seq 50); do
	(in_ns -bp -qQ) >"$T/mailq.log" 2>&1
	grep -q 'QUARANTINE: nddmilter: spam campaign' "$T/mailq.log" && { held=1; break; }
	sleep 0.1
done
if [ -n "$held" ] && grep -q '<- *250 ' "$T/swaks-held.log"; then
	pass "(b) campaign copy quarantined: $(grep -o 'QUARANTINE: .*' "$T/mailq.log" | head -1)"
else
	fail "(b) campaign copy not held in Sendmail's quarantine: $(cat "$T/mailq.log")"
fi

# (c) nddmilter down: F= (as shipped) accepts unfiltered; F=T defers.
kill -TERM $NDD_PID && wait $NDD_PID
NDD_PID=
send down-accept "Milter down" "This goes through with F= empty."
if f=$(sink_file down-accept) && ! grep -qi '^X-NDD-' "$f"; then
	pass "(c) milter down, F= (the snippet as shipped): accepted and relayed unfiltered"
else
	fail "(c) milter down with F=: not relayed"
	grep -E '^(<~?\*\*|<- *[0-9])' "$T/swaks-down-accept.log" | tail -3
fi
start_sendmail T
send down-tempfail "Milter down" "This is deferred with F=T."
if grep -q '<\*\* *451 4.3.2' "$T/swaks-down-tempfail.log"; then
	pass "(c) milter down, F=T: $(grep -o '451 4.3.2.*' "$T/swaks-down-tempfail.log" | head -1)"
else
	fail "(c) milter down with F=T: no 451 4.3.2"
	grep -E '^(<~?\*\*|<- *[0-9])' "$T/swaks-down-tempfail.log" | tail -3
fi
