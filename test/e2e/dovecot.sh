#!/usr/bin/env bash
# End-to-end test: users' Junk moves in a real Dovecot feed nddmilter, as
# contrib/dovecot/README.md sets it up (its Dovecot 2.3 snippet, Sieve
# scripts and pipe program, paths rewritten into a temp dir).
#
# Runs a private Dovecot (imap on a loopback port, passwd-file users whose
# mail processes run as a mail user made for the test), a private Postfix
# relaying to smtp-sink through nddmilter, and nddmilter with its report
# socket and spool; Python's imaplib moves messages. Proves:
#   a) five users moving copies of a campaign into Junk create one
#      campaign whose reporters are those IMAP users;
#   b) a randomized copy sent through the real Postfix is rejected;
#   c) the same user reporting the same message again (APPEND into Junk,
#      a repeated move) counts once;
#   d) a move out of Junk (not to Trash) is a not-spam report that
#      withdraws that user's spam vote; a move to Trash reports nothing;
#   e) a caller the daemon does not allow is refused over the socket;
#   f) with the daemon stopped, the move still succeeds at once, the report
#      is spooled, and it arrives when the daemon starts again.
# Installs dovecot-imapd, dovecot-sieve, postfix and swaks from Debian's
# packages when missing (root). Bounded in time; cleans up after itself;
# prints "N passed, N failed" and exits non-zero on failure.
# Environment: NDD_E2E_TIMEOUT (seconds, default 240), NDD_E2E_KEEP (a
# folder to keep the logs in), NDD_BIN (a built nddmilter to test).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export PATH=$PATH:/usr/local/go/bin:/usr/sbin:/sbin
TIME_LIMIT=${NDD_E2E_TIMEOUT:-240}

# pass, fail, die, free_port, wait_port, the watchdog, summary_exit.
. "$ROOT/test/e2e/lib.sh"

# --- prerequisites -----------------------------------------------------------
skip_unless_root "the Dovecot end-to-end test needs root (Dovecot's users, Postfix's queue)"
need=()
command -v dovecot >/dev/null || need+=(dovecot-imapd)
[ -e /usr/lib/dovecot/modules/sieve/lib90_sieve_imapsieve_plugin.so ] || [ -n "$(ls /usr/lib/dovecot/modules/lib*imap_sieve_plugin.so 2>/dev/null)" ] || need+=(dovecot-sieve)
command -v postfix >/dev/null && command -v smtp-sink >/dev/null || need+=(postfix)
command -v swaks >/dev/null || need+=(swaks)
apt_install "${need[@]}"
install_commands curl
for c in dovecot sievec postfix postconf smtp-sink swaks python3 go sha256sum; do
	command -v $c >/dev/null || die "missing command: $c"
done

# The mail user Dovecot's mail processes run as (vmail on a real server),
# and one more user the daemon does not allow; removed at the end when
# this script created them.
CREATED_USERS=
for u in ndd-vmail ndd-other; do
	if ! id -u $u >/dev/null 2>&1; then
		useradd --system --user-group --no-create-home --shell /usr/sbin/nologin $u || die "cannot create user $u"
		CREATED_USERS="$CREATED_USERS $u"
	fi
done
VMAIL_UID=$(id -u ndd-vmail)
VMAIL_GID=$(id -g ndd-vmail)

# --- workspace, cleanup and time bound ---------------------------------------
T=$(mktemp -d /tmp/ndd-e2e-dovecot.XXXXXX)
chmod 755 "$T"
DC=$T/dovecot
PF=$T/postfix
NDD_PID=
DC_PID=
PF_PID=
SINK_PID=

stop_daemon() {
	[ -n "$NDD_PID" ] && kill -TERM "$NDD_PID" 2>/dev/null && wait "$NDD_PID" 2>/dev/null
	NDD_PID=
}
cleanup() {
	local rc=$?
	stop_watchdog
	stop_daemon
	[ -n "$DC_PID" ] && kill -TERM "$DC_PID" 2>/dev/null && wait "$DC_PID" 2>/dev/null
	local pid
	pid=$(cat "$T/queue/pid/master.pid" 2>/dev/null | tr -d ' ')
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null
	[ -n "$PF_PID" ] && wait "$PF_PID" 2>/dev/null
	[ -n "$SINK_PID" ] && kill "$SINK_PID" 2>/dev/null && wait "$SINK_PID" 2>/dev/null
	if [ "$failed" -gt 0 ] || [ "$rc" -ne 0 ]; then
		echo "--- nddmilter log (tail)"; tail -20 "$T/nddmilter.log" 2>/dev/null
		echo "--- dovecot log (tail)"; tail -30 "$T/dovecot.log" 2>/dev/null
	fi
	keep_logs '*.log'
	rm -rf "$T"
	for u in $CREATED_USERS; do
		userdel "$u" 2>/dev/null
	done
	summary_exit "$rc"
}
trap cleanup EXIT
start_watchdog
free_port; IMAP_PORT=$PORT
free_port; SMTP_PORT=$PORT
free_port; SINK_PORT=$PORT
free_port; MILTER_PORT=$PORT
free_port; HTTP_PORT=$PORT
TOKEN=e2e-token-$RANDOM$RANDOM$RANDOM$RANDOM$RANDOM$RANDOM

# --- build nddmilter (or take NDD_BIN) ---------------------------------------
if [ -n "${NDD_BIN:-}" ]; then
	cp "$NDD_BIN" "$T/nddmilter" || die "NDD_BIN: cannot copy $NDD_BIN"
else
	echo "== building nddmilter"
	(cd "$ROOT" && go build -o "$T/nddmilter" ./cmd/nddmilter && go build -o "$T/nddmilter-pipe" ./cmd/nddmilter-pipe) || die "go build failed"
fi
chmod 755 "$T/nddmilter"

# --- nddmilter: milter, HTTP API, report socket, spool -----------------------
mkdir -p "$T/run"
cat >"$T/nddmilter.yaml" <<EOF
milter:
  listen: inet:127.0.0.1:$MILTER_PORT
http:
  listen: 127.0.0.1:$HTTP_PORT
  token: $TOKEN
api:
  socket: $T/run/report.sock
  socket_group: ndd-vmail
  allow_users: [ndd-vmail]
  spool_dir: $T/spool
  spool_interval: 2s
store:
  dir: $T/store
log:
  format: json
  level: debug
EOF
start_daemon() {
	"$T/nddmilter" serve --config "$T/nddmilter.yaml" >>"$T/nddmilter.log" 2>&1 &
	NDD_PID=$!
	for _ in $(seq 100); do
		curl -sf "http://127.0.0.1:$HTTP_PORT/readyz" >/dev/null 2>&1 && [ -S "$T/run/report.sock" ] && return 0
		kill -0 $NDD_PID 2>/dev/null || break
		sleep 0.1
	done
	die "nddmilter serve did not become ready"
}
start_daemon
pass "nddmilter is ready, report socket $(stat -c '%A %G' "$T/run/report.sock"), spool $(stat -c '%A %G' "$T/spool")"
api() { curl -sf -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$HTTP_PORT$1"; }

# --- smtp-sink and a private Postfix through nddmilter -----------------------
mkdir -p "$T/sink" "$PF" "$T/queue" "$T/data"
chown postfix "$T/sink" "$T/data"
smtp-sink -u postfix -d "$T/sink/%M." -c 127.0.0.1:$SINK_PORT 100 >"$T/sink.log" 2>&1 &
SINK_PID=$!
wait_port $SINK_PORT 5 || die "smtp-sink did not start"
cp /etc/postfix/master.cf "$PF/master.cf"
cat >"$PF/main.cf" <<EOF
compatibility_level = 3.6
queue_directory = $T/queue
data_directory = $T/data
myhostname = e2e.test.local
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
smtpd_milters = inet:127.0.0.1:$MILTER_PORT
non_smtpd_milters = \$smtpd_milters
milter_default_action = accept
milter_protocol = 6
EOF
postconf -c "$PF" -F '*/*/chroot = n'
postconf -c "$PF" -M smtp/inet="127.0.0.1:$SMTP_PORT inet n - n - - smtpd"
postfix -c "$PF" check >"$T/postfix-check.log" 2>&1 || { cat "$T/postfix-check.log"; die "postfix check failed"; }
postfix -c "$PF" start-fg >>"$T/postfix-fg.log" 2>&1 &
PF_PID=$!
wait_port $SMTP_PORT 15 || die "postfix did not start"

# --- Dovecot: contrib/dovecot's files, paths into the workspace --------------
mkdir -p "$DC/sieve" "$DC/sieve-pipe" "$DC/run" "$T/mail"
chown ndd-vmail:ndd-vmail "$T/mail"
sed -e "s#/usr/bin/nddmilter#$T/nddmilter#" -e "s#/run/nddmilter/report.sock#$T/run/report.sock#" \
	-e "s#/var/spool/nddmilter#$T/spool#" "$ROOT/contrib/dovecot/nddmilter-report" >"$DC/sieve-pipe/nddmilter-report"
chmod 755 "$DC/sieve-pipe/nddmilter-report"
cp "$ROOT"/contrib/dovecot/*.sieve "$DC/sieve/"
sed -e "s#/usr/lib/dovecot/sieve-pipe#$DC/sieve-pipe#" -e "s#/etc/dovecot/sieve#$DC/sieve#" \
	"$ROOT/contrib/dovecot/90-nddmilter.conf" >"$DC/90-nddmilter.conf"
USERS="alice bob carol dave erin frank"
: >"$DC/users"
for u in $USERS; do
	echo "$u:{PLAIN}pw-$u:$VMAIL_UID:$VMAIL_GID::$T/mail/$u::" >>"$DC/users"
done
cat >"$DC/dovecot.conf" <<EOF
base_dir = $DC/run
state_dir = $DC/state
instance_name = ndd-e2e-$$
log_path = $T/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain
first_valid_uid = $VMAIL_UID
last_valid_uid = $VMAIL_UID
mail_location = maildir:~/Maildir
passdb {
  driver = passwd-file
  args = scheme=PLAIN $DC/users
}
userdb {
  driver = passwd-file
  args = $DC/users
}
namespace inbox {
  inbox = yes
  separator = /
  mailbox Junk {
    special_use = \Junk
    auto = create
  }
  mailbox Trash {
    special_use = \Trash
    auto = create
  }
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = $IMAP_PORT
  }
  inet_listener imaps {
    port = 0
  }
}
service anvil {
  chroot =
}
service imap-login {
  chroot =
}
!include $DC/90-nddmilter.conf
EOF
mkdir -p "$DC/state"
sievec -c "$DC/dovecot.conf" "$DC/sieve/nddmilter-report-spam.sieve" >"$T/sievec.log" 2>&1 &&
	sievec -c "$DC/dovecot.conf" "$DC/sieve/nddmilter-report-ham.sieve" >>"$T/sievec.log" 2>&1 ||
	{ cat "$T/sievec.log"; die "sievec failed on contrib/dovecot's scripts"; }
pass "contrib/dovecot's Sieve scripts compile (sievec)"
dovecot -c "$DC/dovecot.conf" -F >"$T/dovecot-fg.log" 2>&1 &
DC_PID=$!
wait_port $IMAP_PORT 15 || { cat "$T/dovecot-fg.log"; die "dovecot did not start"; }
pass "Dovecot $(dovecot --version | cut -d' ' -f1) serves IMAP on 127.0.0.1:$IMAP_PORT with contrib/dovecot/90-nddmilter.conf"

# --- the IMAP client -----------------------------------------------------------
cat >"$T/imap.py" <<'EOF'
"""imap.py PORT USER ACTION [ARGS]: one IMAP session of a test user.

put FOLDER FILE      APPEND the message in FILE to FOLDER (Junk: an
                     Outlook-style junk report)
move FROM TO MSGID   move the message with that Message-ID (UID COPY, then
                     flag \\Deleted and expunge, as many clients do)
Prints the seconds the command took; exits 1 on any IMAP failure.
"""
import imaplib, sys, time

port, user, action = int(sys.argv[1]), sys.argv[2], sys.argv[3]
m = imaplib.IMAP4("127.0.0.1", port, timeout=30)
m.login(user, "pw-" + user)
start = time.monotonic()
if action == "put":
    folder, path = sys.argv[4], sys.argv[5]
    with open(path, "rb") as f:
        typ, _ = m.append(folder, None, None, f.read().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
    assert typ == "OK", typ
else:
    src, dst, msgid = sys.argv[4], sys.argv[5], sys.argv[6]
    typ, _ = m.select(src)
    assert typ == "OK", typ
    typ, data = m.uid("SEARCH", None, "HEADER", "Message-ID", msgid)
    uids = data[0].split()
    assert typ == "OK" and len(uids) == 1, (typ, data)
    typ, _ = m.uid("COPY", uids[0], dst)
    assert typ == "OK", typ
    m.uid("STORE", uids[0], "+FLAGS", "(\\Deleted)")
    m.expunge()
print("%.3f" % (time.monotonic() - start))
m.logout()
EOF
imap() { python3 "$T/imap.py" "$IMAP_PORT" "$@" 2>>"$T/imap.log"; }

# --- messages -----------------------------------------------------------------
CAMPAIGN_TEXT="Dear friend, we are pleased to announce that your account has been selected
for an exclusive investment opportunity with guaranteed monthly returns. Our
financial advisors have prepared a personal portfolio proposal for you. Please
confirm your participation by visiting our secure website and entering your
banking details before the offer expires at the end of this week. Thousands of
satisfied customers have already doubled their savings with our program.
Remember that this invitation is strictly personal and cannot be transferred.
Kind regards, the international investment department."
OTHER_TEXT="Limited stock clearance: premium noise cancelling headphones, studio quality
sound, forty hours of battery life and a foldable travel case, now at a
fraction of the retail price. Free express shipping to every country for
orders placed before midnight. Pay safely by card or bank transfer and get an
extended three year warranty with every purchase from our online store. Hurry,
the discount code expires soon and quantities are strictly limited to stock."
copy_of() { # TEXT N: a randomized copy (its greeting, reference and closing line vary with N)
	local greet=(friend customer client member partner)
	local mood=('The weather is mild today.' 'Our office is closed on Monday.' 'See you soon.')
	printf '%s\n\nReference number %s. %s\n' "${1/friend/${greet[$(($2 % 5))]}}" "$((1000 + $2 * 7))" "${mood[$(($2 % 3))]}"
}
write_msg() { # FILE USER N TEXT: a delivered message, its own Message-ID
	printf 'From: Offers <offers@invest.example>\nTo: %s@example.org\nSubject: Exclusive offer for you\nMessage-ID: <e2e-%s-%s@invest.example>\nDate: %s\n\n%s\n' \
		"$2" "$2" "$3" "$(date -R)" "$(copy_of "$4" "$3")" >"$1"
}
hash_of() { printf %s "$1" | sha256sum | cut -c1-16; }

# campaign_of MSGID-less check: the campaign a message is in, by the API's
# dry-run check (0 if none).
campaign_of() {
	curl -s -H "Authorization: Bearer $TOKEN" --data-binary @"$1" "http://127.0.0.1:$HTTP_PORT/v1/check" |
		python3 -c 'import json,sys; print(json.load(sys.stdin).get("campaign") or 0)'
}
# field ID EXPR: a Python expression over the campaign's detail d.
field() {
	api "/v1/campaigns/$1" | python3 -c "import json,sys; d=json.load(sys.stdin); print($2)"
}
# wait_field ID EXPR WANT: until EXPR is WANT (10 s at most).
wait_field() {
	local got
	for _ in $(seq 50); do
		got=$(field "$1" "$2" 2>/dev/null)
		[ "$got" = "$3" ] && return 0
		sleep 0.2
	done
	echo "$got"
	return 1
}
REPORTERS='",".join(sorted(r["hash"] for r in d["reporters"] if r["kind"]=="spam"))'
COUNTS='"%d/%d/%d/%d" % (d["spam_reporters"], d["spam_reports"], d["ham_reporters"], d["ham_reports"])'

# (a) five users move their copy of the campaign from INBOX into Junk.
n=0
for u in alice bob carol dave erin; do
	n=$((n + 1))
	write_msg "$T/$u.eml" $u $n "$CAMPAIGN_TEXT"
	imap $u put INBOX "$T/$u.eml" >/dev/null || fail "(a) $u: APPEND to INBOX"
	imap $u move INBOX Junk "<e2e-$u-$n@invest.example>" >"$T/move-$u.time" || fail "(a) $u: move into Junk"
done
ID=$(campaign_of "$T/alice.eml")
want=$(for u in alice bob carol dave erin; do hash_of $u; done | sort | paste -sd,)
if [ "$ID" != 0 ] && wait_field "$ID" "$REPORTERS" "$want" >/dev/null; then
	pass "(a) five Junk moves made campaign $ID, reported by the five IMAP users ($(field "$ID" "$COUNTS") spam reporters/reports/ham reporters/reports)"
else
	fail "(a) campaign ${ID:-none}: reporters $(field "${ID:-0}" "$REPORTERS" 2>/dev/null), want $want"
	grep -i 'sieve\|pipe\|nddmilter' "$T/dovecot.log" | tail -5
fi

# (b) a randomized copy through the real Postfix is rejected.
swaks --server 127.0.0.1:$SMTP_PORT --from sender@example.net --to user@example.org \
	--header "Subject: Exclusive offer for you" --body "$(copy_of "$CAMPAIGN_TEXT" 17)" --timeout 30 >"$T/swaks-copy.log" 2>&1
if grep -q "550 5.7.1 Message rejected as spam campaign $ID (nddmilter)" "$T/swaks-copy.log"; then
	pass "(b) a randomized copy sent through Postfix is rejected: $(grep -o '550 5.7.1 .*' "$T/swaks-copy.log" | head -1)"
else
	fail "(b) the copy through Postfix was not rejected: $(grep -E '^ *<[~*-]* *[0-9]{3} ' "$T/swaks-copy.log" | tail -2)"
fi

# (c) the same message again: alice APPENDs hers into Junk (as clients that
# upload a copy do), bob puts his in INBOX again and moves it into Junk a
# second time; each counts once.
spam_reports() { curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | awk '/^nddmilter_reports_total\{kind="spam"\}/ { print $2 }'; }
before=$(field "$ID" "$COUNTS")
sent=$(spam_reports)
imap alice put Junk "$T/alice.eml" >/dev/null || fail "(c) alice: APPEND into Junk"
imap bob put INBOX "$T/bob.eml" >/dev/null && imap bob move INBOX Junk "<e2e-bob-2@invest.example>" >/dev/null ||
	fail "(c) bob: second move into Junk"
after=$(field "$ID" "$COUNTS")
received=$(($(spam_reports) - sent))
if [ "$received" = 2 ] && [ "$before" = "$after" ]; then
	pass "(c) an APPEND into Junk and a repeated move of the same messages: 2 reports received, counted once ($after)"
else
	fail "(c) repeated reports: $received received (want 2), counts $before -> $after"
fi

# (d) erin moves hers out of Junk into INBOX: not spam, her spam vote
# withdrawn; dave moves his to Trash: nothing.
imap dave move Junk Trash "<e2e-dave-4@invest.example>" >/dev/null || fail "(d) dave: move to Trash"
imap erin move Junk INBOX "<e2e-erin-5@invest.example>" >/dev/null || fail "(d) erin: move out of Junk"
if got=$(wait_field "$ID" "$COUNTS" "4/4/1/1"); then
	pass "(d) a move out of Junk counts as not spam and withdraws that user's spam vote; a move to Trash reports nothing (4/4/1/1)"
else
	fail "(d) after the moves out of Junk: $got, want 4/4/1/1 (spam reporters/reports/ham reporters/reports)"
fi

# (e) users the daemon does not allow report nothing, and the pipe still
# exits 0: one kept out by the socket's mode, one in the socket's group
# (so it can connect) refused by its peer credentials.
write_msg "$T/other.eml" other 1 "$OTHER_TEXT"
for groups in --clear-groups --groups=ndd-vmail; do
	out=$(setpriv --reuid=ndd-other --regid=ndd-other $groups -- "$T/nddmilter" report --socket "$T/run/report.sock" \
		--reporter mallory --kind spam <"$T/other.eml" 2>&1)
	rc=$?
	if [ $rc = 0 ] && [ "$(campaign_of "$T/other.eml")" = 0 ]; then
		pass "(e) ndd-other ($groups) reports nothing, exit 0: $(echo "$out" | head -1 | sed 's/Post "[^"]*": //')"
	else
		fail "(e) ndd-other ($groups): rc $rc, $out"
	fi
done
sock_out=$(setpriv --reuid=ndd-vmail --regid=ndd-vmail --groups=ndd-vmail -- sh -c \
	"printf 'GET /v1/campaigns HTTP/1.0\r\n\r\n' | python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.stdin.buffer.read()); print(s.recv(200).decode().splitlines()[0])' $T/run/report.sock" 2>&1)
case "$sock_out" in
*" 404 "*) pass "(e) the report socket serves reports only: GET /v1/campaigns -> $sock_out" ;;
*) fail "(e) GET /v1/campaigns over the report socket: $sock_out" ;;
esac

# (f) daemon stopped: frank's move succeeds at once, the report is
# spooled, and arrives when the daemon starts again.
stop_daemon
write_msg "$T/frank.eml" frank 6 "$OTHER_TEXT"
imap frank put INBOX "$T/frank.eml" >/dev/null || fail "(f) frank: APPEND to INBOX"
secs=$(imap frank move INBOX Junk "<e2e-frank-6@invest.example>") || fail "(f) frank: move into Junk with the daemon down"
spooled=$(ls "$T/spool/new" 2>/dev/null | wc -l)
if [ "$spooled" = 1 ] && awk -v s="$secs" 'BEGIN { exit !(s < 5) }'; then
	pass "(f) with the daemon down the move succeeded in ${secs}s and the report is spooled"
else
	fail "(f) daemon down: move took ${secs:-?}s, $spooled spooled"
fi
start_daemon
ID2=0
for _ in $(seq 50); do
	ID2=$(campaign_of "$T/frank.eml")
	[ "$ID2" != 0 ] && break
	sleep 0.2
done
if [ "$ID2" != 0 ] && [ "$(field "$ID2" "$REPORTERS")" = "$(hash_of frank)" ] && [ -z "$(ls "$T/spool/new")" ]; then
	pass "(f) after the restart the spooled report created campaign $ID2, reported by frank; the spool is empty"
else
	fail "(f) after restart: campaign $ID2, spool $(ls "$T/spool/new" | wc -l)"
fi

# The measured move times (APPEND to Junk included in c: informative).
echo "move into Junk with the daemon up: $(cat "$T"/move-*.time | sort -n | paste -sd' ') s"
