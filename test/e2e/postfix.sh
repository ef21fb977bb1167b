#!/usr/bin/env bash
# End-to-end test: nddmilter attached to a real Postfix.
#
# Builds nddmilter, runs a private Postfix instance on loopback (its own
# config and queue directories in a temp dir, free ports, started in the
# foreground) with smtp-sink as the next hop, and proves:
#   a) a normal message is delivered with the X-NDD-Verdict header, and a
#      forged X-NDD-Verdict header from outside is removed;
#   b) after reports through the HTTP API, a randomized copy of the
#      campaign is rejected with the 550 text naming the campaign;
#   c) after SIGHUP with policy.max_action: quarantine, a copy is held
#      (postqueue -p marks it "!");
#   d) with nddmilter stopped, mail follows milter_default_action:
#      accept -> delivered, tempfail -> 4xx;
#   e) (before d) a load of messages from Postfix's smtp-source over 4
#      parallel SMTP sessions is delivered, each checked and with its
#      verdict header, without a milter warning from Postfix, and Postfix
#      keeps at least a third of the rate it has without a milter; mail
#      submitted with the sendmail command (non_smtpd_milters) gets its
#      verdict too;
#   f) over a unix socket given to the postfix group (socket_group), mail
#      is delivered with its verdict.
# Installs postfix and swaks from Debian's packages when missing (root).
# Cleans up after itself, bounded in time; prints "N passed, N failed" and
# exits non-zero on failure. Needs root (Postfix's own user and queue).
# Environment: NDD_E2E_TIMEOUT (seconds, default 280), NDD_E2E_LEXICON (a
# lexicon file instead of the embedded one), NDD_E2E_LOAD (messages of the
# load step, default 400), NDD_E2E_KEEP (a folder to keep the logs in),
# NDD_BIN (a built nddmilter to test instead of building one, e.g. the
# package's /usr/bin/nddmilter), NDD_E2E_USER (run the daemon as this user,
# e.g. the package's nddmilter, with group postfix as a supplementary
# group like the unit's SupplementaryGroups=postfix; test/e2e/package.sh).
# NDD_E2E_SERVER (d--j or d--j-buffered: run every step against the daemon
# speaking the milter protocol through github.com/d--j/go-milter, `nddlab
# bench serve`, to compare it with the own server; default: nddmilter serve).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export PATH=$PATH:/usr/local/go/bin:/usr/sbin:/sbin
TIME_LIMIT=${NDD_E2E_TIMEOUT:-280}
# The daemon's command: `nddmilter serve`, or the lab's comparison server
# (`nddlab bench serve`).
SERVE=(serve)
case "${NDD_E2E_SERVER:-}" in
"" | own) ;;
d--j | d--j-buffered) SERVE=(bench serve --server "$NDD_E2E_SERVER") ;;
*) echo "FATAL: NDD_E2E_SERVER=$NDD_E2E_SERVER: want own, d--j or d--j-buffered"; exit 1 ;;
esac

# pass, fail, die, free_port, wait_port, the watchdog, summary_exit.
. "$ROOT/test/e2e/lib.sh"

# --- prerequisites -----------------------------------------------------------
skip_unless_root "the Postfix end-to-end test needs root (Postfix's own user and queue)"
install_postfix
install_commands curl
for c in postfix postconf postqueue smtp-sink swaks curl go; do
	command -v $c >/dev/null || die "missing command: $c"
done

# --- workspace, cleanup and time bound ---------------------------------------
T=$(mktemp -d /tmp/ndd-e2e.XXXXXX)
chmod 755 "$T"
PF=$T/postfix     # Postfix config directory
NDD_PID=
SINK_PID=
PF_PID=

stop_postfix() {
	local pid
	pid=$(cat "$T/queue/pid/master.pid" 2>/dev/null | tr -d ' ')
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null
	[ -n "$PF_PID" ] && wait "$PF_PID" 2>/dev/null
	PF_PID=
}
cleanup() {
	local rc=$?
	stop_watchdog
	[ -n "$NDD_PID" ] && kill -TERM "$NDD_PID" 2>/dev/null && wait "$NDD_PID" 2>/dev/null
	stop_postfix
	[ -n "$SINK_PID" ] && kill "$SINK_PID" 2>/dev/null && wait "$SINK_PID" 2>/dev/null
	if [ "$failed" -gt 0 ] || [ "$rc" -ne 0 ]; then
		echo "--- nddmilter log (tail)"; tail -30 "$T/nddmilter.log" 2>/dev/null
		echo "--- postfix log (tail)"; tail -30 "$T/postfix.log" 2>/dev/null
	fi
	keep_logs '*.log'
	rm -rf "$T"
	summary_exit "$rc"
}
trap cleanup EXIT
start_watchdog
free_port; SMTP_PORT=$PORT
free_port; SINK_PORT=$PORT
free_port; MILTER_PORT=$PORT
free_port; HTTP_PORT=$PORT
TOKEN=e2e-token-$RANDOM$RANDOM$RANDOM$RANDOM$RANDOM$RANDOM

# --- build nddmilter (or take NDD_BIN) ---------------------------------------
build_nddmilter
DAEMON=$NDD
if [ "${SERVE[0]}" = bench ]; then
	build_nddlab
	DAEMON=$LAB
fi
# run_daemon: the daemon (DAEMON SERVE), as NDD_E2E_USER when set (the workspace,
# where its unix socket goes, and its store given to it); exec, so that $!
# of `run_daemon … &` is the daemon's pid (signals reach it).
run_daemon() {
	if [ -n "${NDD_E2E_USER:-}" ]; then
		mkdir -p "$T/store" && chown "$NDD_E2E_USER" "$T" "$T/store"
		exec setpriv --reuid="$NDD_E2E_USER" --regid="$NDD_E2E_USER" --groups=postfix -- "$DAEMON" "${SERVE[@]}" "$@"
	fi
	exec "$DAEMON" "${SERVE[@]}" "$@"
}

# --- smtp-sink: the next hop that keeps every delivered message --------------
mkdir -p "$T/sink"
chown postfix "$T/sink"
smtp-sink -u postfix -d "$T/sink/%M." -c 127.0.0.1:$SINK_PORT 100 >"$T/sink.log" 2>&1 &
SINK_PID=$!
wait_port $SINK_PORT 5 || die "smtp-sink did not start"

# --- private Postfix instance -------------------------------------------------
mkdir -p "$PF" "$T/queue" "$T/data"
chown postfix "$T/data"
cp /etc/postfix/master.cf "$PF/master.cf"
cat >"$PF/main.cf" <<EOF
compatibility_level = 3.6
queue_directory = $T/queue
data_directory = $T/data
myhostname = e2e.test.local
mydomain = test.local
inet_interfaces = loopback-only
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
mydestination =
relayhost = [127.0.0.1]:$SINK_PORT
smtp_dns_support_level = disabled
alias_maps =
alias_database =
smtpd_relay_restrictions = permit_mynetworks, reject
maillog_file = $T/postfix.log
maillog_file_prefixes = $T
# nddmilter, as in contrib/postfix/main.cf.snippet
smtpd_milters = inet:127.0.0.1:$MILTER_PORT
non_smtpd_milters = \$smtpd_milters
milter_default_action = accept
milter_protocol = 6
milter_connect_timeout = 5s
milter_command_timeout = 5s
milter_content_timeout = 10s
milter_mail_macros = i {mail_addr} {mail_host} {mail_mailer}
milter_end_of_data_macros = i
EOF
postconf -c "$PF" -F '*/*/chroot = n'
postconf -c "$PF" -M smtp/inet="127.0.0.1:$SMTP_PORT inet n - n - - smtpd"
postfix -c "$PF" check >"$T/postfix-check.log" 2>&1 || { cat "$T/postfix-check.log"; die "postfix check failed"; }
start_postfix() {
	postfix -c "$PF" start-fg >>"$T/postfix-fg.log" 2>&1 &
	PF_PID=$!
	wait_port $SMTP_PORT 15 || die "postfix did not start"
}
start_postfix

# --- nddmilter ----------------------------------------------------------------
write_config() { # max_action
	cat >"$T/nddmilter.yaml" <<EOF
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
EOF
	if [ -n "${NDD_E2E_LEXICON:-}" ]; then
		printf 'signatures:\n  lexicon: %s\n' "$NDD_E2E_LEXICON" >>"$T/nddmilter.yaml"
	fi
}
write_config reject
run_daemon --config "$T/nddmilter.yaml" >>"$T/nddmilter.log" 2>&1 &
NDD_PID=$!
ready=
for _ in $(seq 100); do
	if curl -sf "http://127.0.0.1:$HTTP_PORT/readyz" >/dev/null 2>&1; then
		ready=1
		break
	fi
	kill -0 $NDD_PID 2>/dev/null || break
	sleep 0.1
done
[ -n "$ready" ] || die "${DAEMON##*/} ${SERVE[*]} did not become ready"
pass "${DAEMON##*/} ${SERVE[*]} is ready (/readyz)"

# --- messages -----------------------------------------------------------------
CAMPAIGN_TEXT="Dear friend, we are pleased to announce that your account has been selected
for an exclusive investment opportunity with guaranteed monthly returns. Our
financial advisors have prepared a personal portfolio proposal for you. Please
confirm your participation by visiting our secure website and entering your
banking details before the offer expires at the end of this week. Thousands of
satisfied customers have already doubled their savings with our program.
Remember that this invitation is strictly personal and cannot be transferred.
Kind regards, the international investment department."

campaign_copy() { # n: a randomized copy (its greeting, reference and closing line vary with n)
	local greet=(friend customer client member partner)
	local mood=('The weather is mild today.' 'Our office is closed on Monday.' 'See you soon.')
	printf '%s\n\nReference number %s. %s\n' \
		"${CAMPAIGN_TEXT/friend/${greet[$(($1 % 5))]}}" "$((1000 + $1 * 7))" "${mood[$(($1 % 3))]}"
}

send() { # name subject body [extra swaks args...]; transcript in $T/swaks-NAME.log
	local name=$1 subject=$2 body=$3
	shift 3
	swaks --server 127.0.0.1:$SMTP_PORT --from sender@example.net --to user@example.org \
		--header "Subject: $subject" --header "X-E2E-Test: $name" --body "$body" \
		--timeout 30 "$@" >"$T/swaks-$name.log" 2>&1
}

sink_file() { # X-E2E-Test name -> file, waiting up to 15 s
	local f
	for _ in $(seq 150); do
		f=$(grep -l "^X-E2E-Test: $1\$" "$T"/sink/* 2>/dev/null | head -1)
		[ -n "$f" ] && { echo "$f"; return 0; }
		sleep 0.1
	done
	return 1
}

# (a) a normal message is delivered, with the verdict header; a forged one is removed.
send normal "Lunch on Friday?" "Shall we meet at noon at the usual place? Bring the report." \
	--add-header "X-NDD-Verdict: reject; forged=yes"
if f=$(sink_file normal); then
	n=$(grep -ci '^X-NDD-Verdict:' "$f")
	if grep -q '^X-NDD-Verdict: accept; score=' "$f" && [ "$n" = 1 ]; then
		pass "(a) normal message delivered with X-NDD-Verdict: $(grep '^X-NDD-Verdict:' "$f")"
	else
		fail "(a) delivered message lacks the verdict header or kept the forged one ($n X-NDD-Verdict headers)"
		grep -i '^X-NDD' "$f"
	fi
	grep -q 'forged=yes' "$f" && fail "(a) forged X-NDD-Verdict header not removed" || pass "(a) forged X-NDD-Verdict header removed"
else
	fail "(a) normal message not delivered to the sink"
	cat "$T/swaks-normal.log"
fi

# Postfix and nddmilter agreed on milter protocol 6 with no reply to any
# step before end of message (one round trip per message).
if grep '"msg":"milter connection negotiated"' "$T/nddmilter.log" | grep -q '"version":6,.*"streaming":true'; then
	pass "(a) milter protocol 6 negotiated, no reply before end of message: $(grep -o '"msg":"milter connection negotiated"[^}]*' "$T/nddmilter.log" | head -1 | grep -o '"protocol":"[^"]*"')"
else
	fail "(a) Postfix did not negotiate protocol 6 with the no-reply flags: $(grep 'negotiated' "$T/nddmilter.log" | head -2)"
fi

# (b) report the campaign through the API (five users: the default policy
# rejects only well-reported campaigns; four with curl, one with `nddmilter
# report --api`), then a randomized copy is rejected.
for i in 1 2 3 4 5; do
	user=$(echo alice bob carol dave erin | cut -d' ' -f$i)
	printf 'From: Investments <offers@invest.example>\nTo: %s@example.org\nSubject: Exclusive investment opportunity\n\n%s\n' \
		"$user" "$(campaign_copy $i)" >"$T/report-$i.eml"
	if [ $i = 5 ]; then
		# The administrator's way: the CLI through the daemon's API.
		"$T/nddmilter" report --api "http://127.0.0.1:$HTTP_PORT" --token "$TOKEN" --reporter "$user" \
			"$T/report-$i.eml" >"$T/report-$i.json" 2>&1 ||
			fail "(b) nddmilter report --api: $(cat "$T/report-$i.json")"
		continue
	fi
	code=$(curl -s -o "$T/report-$i.json" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
		--data-binary @"$T/report-$i.eml" "http://127.0.0.1:$HTTP_PORT/v1/reports?kind=spam&reporter=$user")
	[ "$code" = 200 ] || fail "(b) report $i through the API: HTTP $code $(cat "$T/report-$i.json")"
done
send copy1 "Exclusive investment opportunity" "$(campaign_copy 11)"
if grep -q '<\*\* *550 5.7.1 Message rejected as spam campaign [0-9]* (nddmilter)' "$T/swaks-copy1.log"; then
	pass "(b) campaign copy rejected: $(grep -o '550 5.7.1 .*' "$T/swaks-copy1.log" | head -1)"
else
	fail "(b) campaign copy not rejected with the 550 text"
	grep -E '^(<~?\*\*|<- *[0-9])' "$T/swaks-copy1.log" | tail -5
fi
curl -s "http://127.0.0.1:$HTTP_PORT/metrics" >"$T/metrics.txt"
if grep -q '^nddmilter_messages_total{action="reject"} 1' "$T/metrics.txt" && grep -q '^nddmilter_reports_total{kind="spam"} 5' "$T/metrics.txt"; then
	pass "(b) /metrics counts the reject and the 5 reports"
else
	fail "(b) /metrics: $(grep -E '^nddmilter_(messages|reports)_total' "$T/metrics.txt" | tr '\n' ' ')"
fi

# (c) reload (SIGHUP) with policy.max_action: quarantine; a copy is held.
write_config quarantine
kill -HUP $NDD_PID
for _ in $(seq 50); do
	grep -q '"msg":"reloaded"' "$T/nddmilter.log" && break
	sleep 0.1
done
grep -q '"msg":"reloaded"' "$T/nddmilter.log" && pass "(c) SIGHUP reloaded the configuration" || fail "(c) no reload after SIGHUP"
send copy2 "Exclusive investment opportunity" "$(campaign_copy 12)"
held=
for _ in $(seq 50); do
	if postqueue -c "$PF" -p 2>/dev/null | grep -q '^[0-9A-F]*!'; then
		held=1
		break
	fi
	sleep 0.1
done
if [ -n "$held" ] && grep -q '<- *250 ' "$T/swaks-copy2.log"; then
	pass "(c) campaign copy quarantined (held): $(postqueue -c "$PF" -p | grep '!' | head -1)"
else
	fail "(c) campaign copy not held"
	postqueue -c "$PF" -p
fi

# (e) load: Postfix's own smtp-source, 4 parallel SMTP sessions, several
# messages per connection (-d), LOAD messages in all: every one is
# delivered, checked by nddmilter and carries its verdict, and Postfix logs
# no milter trouble. NDD_E2E_LOAD sets the count (default 400); the rate
# is printed, not asserted.
LOAD=${NDD_E2E_LOAD:-400}
ls "$T/sink" >"$T/sink-before.txt"
checked0=$(grep -c '"from":"<load@example.net>"' "$T/nddmilter.log")
pflines0=$(wc -l <"$T/postfix.log")
daemon_cpu() { awk '{print $14 + $15}' "/proc/$NDD_PID/stat"; } # clock ticks
cpu0=$(daemon_cpu)
t0=$(date +%s%N)
smtp-source -s 4 -m "$LOAD" -d -l 2000 -f load@example.net -t user@example.org "127.0.0.1:$SMTP_PORT" >"$T/load.log" 2>&1 ||
	fail "(e) smtp-source: $(tail -3 "$T/load.log")"
t1=$(date +%s%N)
load_files() { ls "$T/sink" | grep -vxFf "$T/sink-before.txt"; }
for _ in $(seq 300); do
	[ "$(load_files | wc -l)" -ge "$LOAD" ] && break
	sleep 0.1
done
t2=$(date +%s%N)
cpu1=$(daemon_cpu)
delivered=$(load_files | wc -l)
with_verdict=$(cd "$T/sink" && load_files | xargs -r grep -l '^X-NDD-Verdict: accept; score=' | wc -l)
checked=$(($(grep -c '"from":"<load@example.net>"' "$T/nddmilter.log") - checked0))
trouble=$(tail -n +$((pflines0 + 1)) "$T/postfix.log" | grep -ciE 'warning: .*milter|milter.*(timeout|error)')
rate_milter=$((LOAD * 1000000000 / (t1 - t0)))
if [ "$delivered" = "$LOAD" ] && [ "$with_verdict" = "$LOAD" ] && [ "$checked" = "$LOAD" ] && [ "$trouble" = 0 ]; then
	pass "(e) $LOAD messages over 4 SMTP sessions: all delivered with a verdict, all checked, no milter warning; accepted by Postfix at $rate_milter msgs/s, delivered at $((LOAD * 1000000000 / (t2 - t0))) msgs/s"
else
	fail "(e) load: $delivered of $LOAD delivered, $with_verdict with a verdict, $checked checked, $trouble milter warnings in the Postfix log"
	tail -n +$((pflines0 + 1)) "$T/postfix.log" | grep -iE 'milter' | tail -5
fi
echo "INFO: (e) ${DAEMON##*/} ${SERVE[*]}: $(((cpu1 - cpu0) * 1000000 / $(getconf CLK_TCK) / LOAD)) µs of CPU per message during the load (its process, from /proc; load average $(cut -d' ' -f1-3 /proc/loadavg))"

# The same load with no milter attached: Postfix's own rate. With the
# milter, Postfix must keep at least a third of it. (Without quickAck,
# Nagle's algorithm on Postfix's side and delayed acknowledgements cost
# 40 ms a message: about a fifth of it.) Measured again once if the
# first pair of runs says otherwise (a busy machine).
milters() { # on|off
	if [ "$1" = on ]; then
		postconf -c "$PF" -e "smtpd_milters = inet:127.0.0.1:$MILTER_PORT" 'non_smtpd_milters = $smtpd_milters'
	else
		postconf -c "$PF" -e 'smtpd_milters =' 'non_smtpd_milters ='
	fi
	postfix -c "$PF" reload >/dev/null 2>&1
	sleep 1
}
load_rate() { # sender: sends LOAD messages, prints the rate Postfix accepted them at
	local t0 t1
	ls "$T/sink" >"$T/sink-before.txt"
	t0=$(date +%s%N)
	smtp-source -s 4 -m "$LOAD" -d -l 2000 -f "$1" -t user@example.org "127.0.0.1:$SMTP_PORT" >"$T/load.log" 2>&1
	t1=$(date +%s%N)
	for _ in $(seq 300); do
		[ "$(load_files | wc -l)" -ge "$LOAD" ] && break
		sleep 0.1
	done
	echo $((LOAD * 1000000000 / (t1 - t0)))
}
milters off
rate_plain=$(load_rate base@example.net)
if [ $((rate_milter * 3)) -lt "$rate_plain" ]; then
	echo "INFO: (e) $rate_milter msgs/s with the milter, $rate_plain without: measuring again"
	milters on
	rate_milter=$(load_rate load2@example.net)
	milters off
	rate_plain=$(load_rate base2@example.net)
fi
if [ $((rate_milter * 3)) -ge "$rate_plain" ]; then
	pass "(e) Postfix keeps $((rate_milter * 100 / rate_plain))% of its own rate with nddmilter attached ($rate_milter against $rate_plain msgs/s without a milter)"
else
	fail "(e) Postfix with nddmilter: $rate_milter msgs/s, without a milter: $rate_plain msgs/s (less than a third: delayed acknowledgements?)"
fi
milters on

# Locally submitted mail (the sendmail command, pickup, cleanup) goes
# through non_smtpd_milters, the same milter.
if printf 'From: local@example.net\nTo: user@example.org\nSubject: Local submission\nX-E2E-Test: local\n\nSubmitted with the sendmail command.\n' |
	sendmail -C "$PF" -f local@example.net user@example.org 2>"$T/sendmail.log"; then
	if f=$(sink_file local) && grep -q '^X-NDD-Verdict: ' "$f"; then
		pass "(e) locally submitted mail (sendmail, non_smtpd_milters): delivered with $(grep '^X-NDD-Verdict:' "$f" | cut -c1-40)…"
	else
		fail "(e) locally submitted mail: not delivered with a verdict"
	fi
else
	fail "(e) sendmail -C: $(cat "$T/sendmail.log")"
fi

# (d) with nddmilter stopped, mail follows milter_default_action.
kill -TERM $NDD_PID
if wait $NDD_PID; then
	pass "(d) nddmilter stopped cleanly on SIGTERM"
else
	fail "(d) nddmilter exit status $? on SIGTERM"
fi
NDD_PID=
send down-accept "Milter down" "This goes through with milter_default_action = accept."
if f=$(sink_file down-accept) && ! grep -qi '^X-NDD-' "$f"; then
	pass "(d) milter down, milter_default_action = accept: delivered without verdict"
else
	fail "(d) milter down with accept: not delivered"
fi
postconf -c "$PF" -e milter_default_action=tempfail
postfix -c "$PF" reload >/dev/null 2>&1
sleep 1
send down-tempfail "Milter down" "This is deferred with milter_default_action = tempfail."
if grep -q '<\*\* *4[0-9][0-9] 4\.' "$T/swaks-down-tempfail.log"; then
	pass "(d) milter down, milter_default_action = tempfail: $(grep -o '4[0-9][0-9] 4\..*' "$T/swaks-down-tempfail.log" | head -1)"
else
	fail "(d) milter down with tempfail: no 4xx"
	tail -5 "$T/swaks-down-tempfail.log"
fi

# (f) a unix socket, as recommended for a local Postfix: nddmilter started
# again with milter.listen unix:…, socket_group: postfix (Postfix's smtpd
# runs as the postfix user), and milter_default_action still tempfail, so
# that a socket Postfix cannot open shows as a 4xx.
write_config reject
sed -i "s#^  listen: inet:127.0.0.1:$MILTER_PORT#  listen: unix:$T/milter.sock\n  socket_group: postfix#" "$T/nddmilter.yaml"
run_daemon --config "$T/nddmilter.yaml" >>"$T/nddmilter.log" 2>&1 &
NDD_PID=$!
for _ in $(seq 100); do
	[ -S "$T/milter.sock" ] && curl -sf "http://127.0.0.1:$HTTP_PORT/readyz" >/dev/null 2>&1 && break
	sleep 0.1
done
postconf -c "$PF" -e "smtpd_milters = unix:$T/milter.sock"
postfix -c "$PF" reload >/dev/null 2>&1
sleep 1
send unix "Over a unix socket" "Shall we meet at noon at the usual place? Bring the report."
if grep -q '<\*\* *4[0-9][0-9] ' "$T/swaks-unix.log"; then
	# An smtpd started before the reload may still hold the old setting.
	sleep 2
	send unix "Over a unix socket" "Shall we meet at noon at the usual place? Bring the report."
fi
if f=$(sink_file unix) && grep -q '^X-NDD-Verdict: accept; score=' "$f"; then
	pass "(f) unix socket ($(stat -c '%A %G' "$T/milter.sock")): delivered with $(grep '^X-NDD-Verdict:' "$f" | cut -c1-40)…"
else
	fail "(f) unix socket: not delivered with a verdict ($(stat -c '%A %U:%G' "$T/milter.sock" 2>&1))"
	grep -E '^(<~?\*\*|<- *[0-9])' "$T/swaks-unix.log" | tail -3
fi
