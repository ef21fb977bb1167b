#!/usr/bin/env bash
# End-to-end test of zero-hour purge (issue #33): a real Postfix delivers
# through nddmilter into a real Dovecot (LMTP); users' Junk moves report
# the campaign (contrib/dovecot's IMAPSieve setup), and nddmilter takes
# back the copies it had let through, over Dovecot's doveadm HTTP API.
#
# First runs the Go tests that need a real Dovecot (they skip without
# one): internal/zap/doveadm, internal/zap/imap. Then proves:
#   a) ten users receive copies of a new campaign through Postfix: all
#      accepted and delivered; a ham from the same sender domain too;
#   b) after five users move theirs into Junk, the other users' unread
#      copies are moved to Junk within seconds; a copy one user had read
#      stays in INBOX, and so does the ham;
#   c) the administrator allows the campaign: the moved copies return to
#      INBOX; the reporters' own Junk moves stay;
#   d) Dovecot stopped while a second campaign escalates: the purge jobs
#      wait and complete once it is back;
#   e) the daemon restarted with the IMAP backend (Dovecot's master user):
#      a third campaign's unread copies move to Junk; `campaigns purges`
#      (through the daemon's API) counts them; `campaigns undo-purge`
#      moves them back and the campaign stays active.
# Installs dovecot-imapd, dovecot-lmtpd, dovecot-sieve, postfix and swaks
# when missing (root). Bounded in time; prints "N passed, N failed".
# Environment: NDD_E2E_TIMEOUT (seconds, default 300), NDD_E2E_KEEP.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export PATH=$PATH:/usr/local/go/bin:/usr/sbin:/sbin
TIME_LIMIT=${NDD_E2E_TIMEOUT:-300}
. "$ROOT/test/e2e/lib.sh"

skip_unless_root "the zero-hour purge end-to-end test needs root (Dovecot's users, Postfix's queue)"
need=()
command -v dovecot >/dev/null || need+=(dovecot-imapd)
[ -e /usr/lib/dovecot/lmtp ] || need+=(dovecot-lmtpd)
[ -e /usr/lib/dovecot/modules/sieve/lib90_sieve_imapsieve_plugin.so ] || [ -n "$(ls /usr/lib/dovecot/modules/lib*imap_sieve_plugin.so 2>/dev/null)" ] || need+=(dovecot-sieve)
command -v postfix >/dev/null || need+=(postfix)
command -v swaks >/dev/null || need+=(swaks)
apt_install "${need[@]}"
install_commands curl
for c in dovecot sievec postfix postconf swaks python3 go; do
	command -v $c >/dev/null || die "missing command: $c"
done

echo "== go test (real Dovecot): internal/zap/doveadm internal/zap/imap"
if (cd "$ROOT" && go test -count=1 -v -run 'RealDovecot' ./internal/zap/doveadm ./internal/zap/imap) >/tmp/ndd-e2e-zap-go.log 2>&1 &&
	! grep -q -- '--- SKIP' /tmp/ndd-e2e-zap-go.log; then
	pass "the backends' Go tests pass on a real Dovecot ($(grep -c -- '--- PASS' /tmp/ndd-e2e-zap-go.log) tests)"
else
	tail -30 /tmp/ndd-e2e-zap-go.log
	fail "the backends' Go tests on a real Dovecot"
fi

CREATED_USERS=
if ! id -u ndd-vmail >/dev/null 2>&1; then
	useradd --system --user-group --no-create-home --shell /usr/sbin/nologin ndd-vmail || die "cannot create user ndd-vmail"
	CREATED_USERS=ndd-vmail
fi
VMAIL_UID=$(id -u ndd-vmail)
VMAIL_GID=$(id -g ndd-vmail)

T=$(mktemp -d /tmp/ndd-e2e-zap.XXXXXX)
chmod 755 "$T"
DC=$T/dovecot
PF=$T/postfix
NDD_PID= DC_PID= PF_PID=
stop_daemon() {
	[ -n "$NDD_PID" ] && kill -TERM "$NDD_PID" 2>/dev/null && wait "$NDD_PID" 2>/dev/null
	NDD_PID=
}
stop_dovecot() {
	[ -n "$DC_PID" ] && kill -TERM "$DC_PID" 2>/dev/null && wait "$DC_PID" 2>/dev/null
	DC_PID=
}
cleanup() {
	local rc=$?
	stop_watchdog
	stop_daemon
	stop_dovecot
	local pid
	pid=$(cat "$T/queue/pid/master.pid" 2>/dev/null | tr -d ' ')
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null
	[ -n "$PF_PID" ] && wait "$PF_PID" 2>/dev/null
	if [ "$failed" -gt 0 ] || [ "$rc" -ne 0 ]; then
		echo "--- nddmilter log (zap lines, tail)"; grep -i 'zap' "$T/nddmilter.log" 2>/dev/null | tail -20
		echo "--- nddmilter log (tail)"; tail -10 "$T/nddmilter.log" 2>/dev/null
		echo "--- dovecot log (tail)"; tail -20 "$T/dovecot.log" 2>/dev/null
		echo "--- postfix log (tail)"; tail -10 "$T/postfix.log" 2>/dev/null
	fi
	keep_logs '*.log'
	rm -rf "$T"
	for u in $CREATED_USERS; do userdel "$u" 2>/dev/null; done
	summary_exit "$rc"
}
trap cleanup EXIT
start_watchdog
free_port; IMAP_PORT=$PORT
free_port; LMTP_PORT=$PORT
free_port; DOVEADM_PORT=$PORT
free_port; SMTP_PORT=$PORT
free_port; MILTER_PORT=$PORT
free_port; HTTP_PORT=$PORT
TOKEN=e2e-token-$RANDOM$RANDOM$RANDOM$RANDOM$RANDOM$RANDOM
DOVEADM_KEY=e2e-doveadm-$RANDOM$RANDOM$RANDOM

echo "== building nddmilter"
(cd "$ROOT" && go build -o "$T/nddmilter" ./cmd/nddmilter && go build -o "$T/nddmilter-pipe" ./cmd/nddmilter-pipe) || die "go build failed"
chmod 755 "$T/nddmilter"

# --- Dovecot: IMAP, LMTP, doveadm HTTP, contrib/dovecot's Junk reports ------
mkdir -p "$DC/sieve" "$DC/sieve-pipe" "$DC/run" "$DC/state" "$T/mail" "$T/run"
chown ndd-vmail:ndd-vmail "$T/mail"
sed -e "s#/usr/bin/nddmilter#$T/nddmilter#" -e "s#/run/nddmilter/report.sock#$T/run/report.sock#" \
	-e "s#/var/spool/nddmilter#$T/spool#" "$ROOT/contrib/dovecot/nddmilter-report" >"$DC/sieve-pipe/nddmilter-report"
chmod 755 "$DC/sieve-pipe/nddmilter-report"
cp "$ROOT"/contrib/dovecot/*.sieve "$DC/sieve/"
sed -e "s#/usr/lib/dovecot/sieve-pipe#$DC/sieve-pipe#" -e "s#/etc/dovecot/sieve#$DC/sieve#" \
	"$ROOT/contrib/dovecot/90-nddmilter.conf" >"$DC/90-nddmilter.conf"
USERS="u1 u2 u3 u4 u5 u6 u7 u8 u9 u10"
: >"$DC/users"
for u in $USERS; do
	echo "$u:{PLAIN}pw-$u:$VMAIL_UID:$VMAIL_GID::$T/mail/$u::" >>"$DC/users"
done
MASTER_PW=e2e-master-$RANDOM$RANDOM$RANDOM
echo "ndd-master:{PLAIN}$MASTER_PW" >"$DC/masters"
cat >"$DC/dovecot.conf" <<EOF
base_dir = $DC/run
state_dir = $DC/state
instance_name = ndd-e2e-zap-$$
log_path = $T/dovecot.log
protocols = imap lmtp
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain
auth_username_format = %Ln
auth_master_user_separator = *
first_valid_uid = $VMAIL_UID
last_valid_uid = $VMAIL_UID
mail_location = maildir:~/Maildir
passdb {
  driver = passwd-file
  args = scheme=PLAIN $DC/masters
  master = yes
  result_success = continue
}
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
doveadm_api_key = $DOVEADM_KEY
service doveadm {
  inet_listener http {
    address = 127.0.0.1
    port = $DOVEADM_PORT
  }
}
service lmtp {
  inet_listener lmtp {
    address = 127.0.0.1
    port = $LMTP_PORT
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
  chroot =
}
service anvil {
  chroot =
}
!include $DC/90-nddmilter.conf
EOF
sievec -c "$DC/dovecot.conf" "$DC/sieve/nddmilter-report-spam.sieve" >"$T/sievec.log" 2>&1 &&
	sievec -c "$DC/dovecot.conf" "$DC/sieve/nddmilter-report-ham.sieve" >>"$T/sievec.log" 2>&1 ||
	{ cat "$T/sievec.log"; die "sievec failed"; }
start_dovecot() {
	dovecot -c "$DC/dovecot.conf" -F >>"$T/dovecot-fg.log" 2>&1 &
	DC_PID=$!
	wait_port $IMAP_PORT 15 && wait_port $DOVEADM_PORT 15 || { cat "$T/dovecot-fg.log"; die "dovecot did not start"; }
}
start_dovecot
pass "Dovecot $(dovecot --version | cut -d' ' -f1): IMAP, LMTP and the doveadm HTTP API on loopback"

# --- nddmilter with zap over doveadm -----------------------------------------
printf '%s\n' "$DOVEADM_KEY" >"$T/doveadm.key"
chmod 600 "$T/doveadm.key"
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
  level: info
zap:
  user_map: local-part
  doveadm:
    url: http://127.0.0.1:$DOVEADM_PORT/doveadm/v1
    api_key_file: $T/doveadm.key
EOF
chmod 644 "$T/doveadm.key"
if out=$("$T/nddmilter" config check "$T/nddmilter.yaml" 2>&1); then
	fail "a group-readable doveadm key file is accepted: $out"
else
	pass "a group-readable credentials file is refused: $(echo "$out" | grep -o 'zap.doveadm.api_key_file.*' | head -1)"
fi
chmod 600 "$T/doveadm.key"
"$T/nddmilter" serve --config "$T/nddmilter.yaml" >>"$T/nddmilter.log" 2>&1 &
NDD_PID=$!
for _ in $(seq 100); do
	curl -sf "http://127.0.0.1:$HTTP_PORT/readyz" >/dev/null 2>&1 && [ -S "$T/run/report.sock" ] && break
	sleep 0.1
done
curl -sf "http://127.0.0.1:$HTTP_PORT/readyz" >/dev/null || die "nddmilter did not become ready"
grep -q 'zero-hour purge on' "$T/nddmilter.log" && pass "nddmilter ready, zero-hour purge on (doveadm)" || fail "zap not on"
api() { curl -sf -H "Authorization: Bearer $TOKEN" "$@"; }

# --- Postfix: SMTP in, nddmilter, LMTP into Dovecot -------------------------
mkdir -p "$PF" "$T/queue" "$T/data"
chown postfix "$T/data"
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
relay_domains = example.org
transport_maps = inline:{ example.org=lmtp:inet:127.0.0.1:$LMTP_PORT }
smtp_dns_support_level = disabled
alias_maps =
alias_database =
smtpd_relay_restrictions = permit_mynetworks, reject
maillog_file = $T/postfix.log
maillog_file_prefixes = $T
smtpd_milters = inet:127.0.0.1:$MILTER_PORT
milter_default_action = accept
milter_protocol = 6
EOF
postconf -c "$PF" -F '*/*/chroot = n'
postconf -c "$PF" -M smtp/inet="127.0.0.1:$SMTP_PORT inet n - n - - smtpd"
postfix -c "$PF" check >"$T/postfix-check.log" 2>&1 || { cat "$T/postfix-check.log"; die "postfix check failed"; }
postfix -c "$PF" start-fg >>"$T/postfix-fg.log" 2>&1 &
PF_PID=$!
wait_port $SMTP_PORT 15 || die "postfix did not start"

# --- IMAP client ---------------------------------------------------------------
cat >"$T/imap.py" <<'EOF'
"""imap.py PORT USER ACTION [ARGS]
ids FOLDER             print the Message-IDs in FOLDER, one a line
read FOLDER MSGID      mark the message \\Seen (the user opened it)
move FROM TO MSGID     move the message (UID MOVE)
"""
import imaplib, re, sys
port, user, action = int(sys.argv[1]), sys.argv[2], sys.argv[3]
m = imaplib.IMAP4("127.0.0.1", port, timeout=30)
m.login(user, "pw-" + user)
if action == "ids":
    m.select(sys.argv[4], readonly=True)
    typ, data = m.uid("SEARCH", None, "ALL")
    for uid in data[0].split():
        typ, d = m.uid("FETCH", uid, "(BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)])")
        mm = re.search(rb"<([^>]*)>", d[0][1])
        print(mm.group(1).decode() if mm else "")
else:
    src = sys.argv[4]
    msgid = sys.argv[-1]
    typ, _ = m.select(src)
    assert typ == "OK", typ
    typ, data = m.uid("SEARCH", None, "HEADER", "Message-ID", "<" + msgid + ">")
    uids = data[0].split()
    assert typ == "OK" and len(uids) == 1, (typ, data)
    if action == "read":
        typ, _ = m.uid("STORE", uids[0], "+FLAGS", "(\\Seen)")
    else:
        typ, _ = m.uid("MOVE", uids[0], sys.argv[5])
    assert typ == "OK", typ
m.logout()
EOF
imap() { python3 "$T/imap.py" "$IMAP_PORT" "$@" 2>>"$T/imap.log"; }
has() { imap "$1" ids "$2" | grep -qxF "$3"; } # USER FOLDER MSGID

# send N TEXT USER ID: a copy through Postfix, its own Message-ID
CAMPAIGN_TEXT="Dear friend, we are pleased to announce that your account has been selected
for an exclusive investment opportunity with guaranteed monthly returns. Our
financial advisors have prepared a personal portfolio proposal for you. Please
confirm your participation by visiting our secure website and entering your
banking details before the offer expires at the end of this week. Thousands of
satisfied customers have already doubled their savings with our program.
Remember that this invitation is strictly personal and cannot be transferred.
Kind regards, the international investment department."
SECOND_TEXT="Limited stock clearance: premium noise cancelling headphones, studio quality
sound, forty hours of battery life and a foldable travel case, now at a
fraction of the retail price. Free express shipping to every country for
orders placed before midnight. Pay safely by card or bank transfer and get an
extended three year warranty with every purchase from our online store. Hurry,
the discount code expires soon and quantities are strictly limited to stock."
HAM_TEXT="Hello, the minutes of Thursday's planning meeting are attached below. We agreed
to move the product launch to the second week of March, to hire two more
support engineers before then, and to review the budget with finance next
Tuesday. Please send me your corrections by Friday noon so that I can publish
the final version on the intranet. Thanks to everyone for the productive
discussion and see you at the next meeting."
copy_of() { # TEXT N
	local greet=(friend customer client member partner)
	printf '%s\n\nReference number %s.\n' "${1/friend/${greet[$(($2 % 5))]}}" "$((1000 + $2 * 7))"
}
send() { # N TEXT USER ID SUBJECT
	printf 'From: Offers <offers@invest.example>\r\nTo: %s@example.org\r\nSubject: %s\r\nMessage-ID: <%s>\r\nDate: %s\r\n\r\n%s\r\n' \
		"$3" "$5" "$4" "$(date -R)" "$(copy_of "$2" "$1" | sed 's/$/\r/')" >"$T/send.eml"
	swaks --server 127.0.0.1:$SMTP_PORT --from offers@invest.example --to "$3@example.org" \
		--data "$T/send.eml" --timeout 30 >>"$T/swaks.log" 2>&1
}
wait_has() { # SECONDS USER FOLDER MSGID
	for _ in $(seq $(($1 * 4))); do has "$2" "$3" "$4" && return 0; sleep 0.25; done
	return 1
}
wait_not() { # SECONDS USER FOLDER MSGID
	for _ in $(seq $(($1 * 4))); do has "$2" "$3" "$4" || return 0; sleep 0.25; done
	return 1
}

# (a) ten copies, all accepted and delivered; a ham from the same domain.
n=0
for u in $USERS; do
	n=$((n + 1))
	send $n "$CAMPAIGN_TEXT" $u "zap-$u@invest.example" "Exclusive offer for you" || fail "(a) send to $u"
done
send 0 "$HAM_TEXT" u6 "ham-u6@invest.example" "Minutes of the planning meeting" || fail "(a) send ham"
ok=1
for u in $USERS; do wait_has 20 $u INBOX "zap-$u@invest.example" || { ok=; fail "(a) $u's copy not in INBOX"; }; done
wait_has 20 u6 INBOX "ham-u6@invest.example" || { ok=; fail "(a) ham not in INBOX"; }
[ -n "$ok" ] && pass "(a) ten copies of a new campaign and a ham from the same domain delivered through Postfix into INBOX"
imap u10 read INBOX "zap-u10@invest.example" || fail "(a) u10 reads its copy"

# (b) five users read theirs and move them into Junk (IMAPSieve reports).
for u in u1 u2 u3 u4 u5; do
	imap $u read INBOX "zap-$u@invest.example" && imap $u move INBOX Junk "zap-$u@invest.example" || fail "(b) $u: move into Junk"
done
t0=$(date +%s.%N)
ok=1
for u in u6 u7 u8 u9; do
	if wait_has 30 $u Junk "zap-$u@invest.example" && ! has $u INBOX "zap-$u@invest.example"; then :; else ok=; fail "(b) $u's unread copy not moved to Junk"; fi
done
secs=$(python3 -c "import time; print('%.1f' % (time.time() - $t0))")
[ -n "$ok" ] && pass "(b) the other users' unread copies are in Junk ${secs}s after the fifth Junk move"
has u10 INBOX "zap-u10@invest.example" && ! has u10 Junk "zap-u10@invest.example" &&
	pass "(b) the copy u10 had read stays in INBOX" || fail "(b) u10's read copy was moved"
has u6 INBOX "ham-u6@invest.example" && pass "(b) the ham from the same sender domain stays in INBOX" || fail "(b) the ham was moved"
moved=$(grep -c '"msg":"zap".*"outcome":"moved"' "$T/nddmilter.log")
[ "$moved" = 4 ] && pass "(b) four log lines of moves" || fail "(b) $moved move log lines, want 4"
ID=$(grep -o '"msg":"zap: campaign reached the trigger","campaign":[0-9]*' "$T/nddmilter.log" | head -1 | grep -o '[0-9]*$')

# (c) the administrator allows the campaign: the moved copies return.
if [ -n "$ID" ] && api -X POST "http://127.0.0.1:$HTTP_PORT/v1/campaigns/$ID/allow" >/dev/null; then
	ok=1
	for u in u6 u7 u8 u9; do
		wait_has 30 $u INBOX "zap-$u@invest.example" && ! has $u Junk "zap-$u@invest.example" || { ok=; fail "(c) $u's copy not back in INBOX"; }
	done
	[ -n "$ok" ] && pass "(c) campaign $ID allowed: the four moved copies are back in INBOX"
	ok=1
	for u in u1 u2 u3 u4 u5; do has $u Junk "zap-$u@invest.example" || { ok=; fail "(c) $u's own Junk move undone"; }; done
	[ -n "$ok" ] && pass "(c) the reporters' own Junk moves stay in Junk"
else
	fail "(c) allow campaign '${ID:-none}'"
fi

# (d) a second campaign escalates while Dovecot is down.
for i in 1 2 3 4 5 6 7 8; do
	u=u$i
	send $((20 + i)) "$SECOND_TEXT" $u "second-$u@invest.example" "Headphones clearance" || fail "(d) send to $u"
done
for i in 1 2 3 4 5 6 7 8; do wait_has 20 u$i INBOX "second-u$i@invest.example" || fail "(d) u$i's second copy not delivered"; done
for u in u1 u2; do
	imap $u read INBOX "second-$u@invest.example" && imap $u move INBOX Junk "second-$u@invest.example" || fail "(d) $u: move into Junk"
done
sleep 3
grep -q '"msg":"zap: campaign reached the trigger","campaign":2' "$T/nddmilter.log" && fail "(d) the second campaign escalated on two reports"
stop_dovecot
before=$(grep -c 'job retried' "$T/nddmilter.log")
for i in 3 4 5; do
	printf 'From: offers@invest.example\nTo: u%s@example.org\nSubject: Headphones clearance\nMessage-ID: <report-%s@invest.example>\n\n%s\n' \
		$i $i "$(copy_of "$SECOND_TEXT" $((40 + i)))" >"$T/report-$i.eml"
	"$T/nddmilter" report --socket "$T/run/report.sock" --reporter "r$i" --kind spam <"$T/report-$i.eml" >>"$T/report.log" 2>&1 ||
		fail "(d) report over the socket"
done
for _ in $(seq 60); do [ "$(grep -c 'job retried' "$T/nddmilter.log")" -gt "$before" ] && break; sleep 0.5; done
if [ "$(grep -c 'job retried' "$T/nddmilter.log")" -gt "$before" ]; then
	pass "(d) with Dovecot down the purge jobs wait: $(grep 'job retried' "$T/nddmilter.log" | tail -1 | grep -o '"retry_in":"[^"]*"')"
else
	fail "(d) no job waited while Dovecot was down"
fi
start_dovecot
ok=1
for u in u3 u4 u5 u6 u7 u8; do
	wait_has 60 $u Junk "second-$u@invest.example" || { ok=; fail "(d) $u's second copy not moved after Dovecot is back"; }
done
[ -n "$ok" ] && pass "(d) Dovecot back: the jobs completed, the six unread copies are in Junk"

# (e) the IMAP backend: the daemon restarted with zap.imap (Dovecot's master
# user), a third campaign escalates; campaigns purges shows what it moved,
# campaigns undo-purge moves it back without allowing the campaign.
stop_daemon
printf '%s\n' "$MASTER_PW" >"$T/imap-master.pass"
chmod 600 "$T/imap-master.pass"
sed -n '/^zap:/q;p' "$T/nddmilter.yaml" >"$T/nddmilter-imap.yaml"
cat >>"$T/nddmilter-imap.yaml" <<EOF
zap:
  user_map: local-part
  imap:
    addr: 127.0.0.1:$IMAP_PORT
    tls: none
    master_user: ndd-master
    password_file: $T/imap-master.pass
EOF
"$T/nddmilter" serve --config "$T/nddmilter-imap.yaml" >>"$T/nddmilter.log" 2>&1 &
NDD_PID=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$HTTP_PORT/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
grep -q 'zero-hour purge on.*imap 127.0.0.1' "$T/nddmilter.log" && pass "(e) nddmilter restarted, zero-hour purge on (imap, master user)" ||
	fail "(e) zap not on over IMAP"
THIRD_TEXT="Your parcel could not be delivered because the customs fee was not paid.
To schedule a new delivery date please confirm your address and pay the
outstanding amount of two dollars within forty eight hours, otherwise the
parcel will be returned to the sender. Track your shipment online with the
reference code printed below and choose a convenient delivery window. Our
courier service thanks you for your patience and cooperation."
for i in 1 2 3 4 5 6 7 8 9; do
	send $((60 + i)) "$THIRD_TEXT" u$i "third-u$i@invest.example" "Parcel delivery notice" || fail "(e) send to u$i"
done
for i in 1 2 3 4 5 6 7 8 9; do wait_has 20 u$i INBOX "third-u$i@invest.example" || fail "(e) u$i's third copy not delivered"; done
for i in 1 2 3 4 5; do
	printf 'From: offers@invest.example\nTo: u%s@example.org\nSubject: Parcel delivery notice\nMessage-ID: <third-report-%s@invest.example>\n\n%s\n' \
		$i $i "$(copy_of "$THIRD_TEXT" $((80 + i)))" >"$T/third-$i.eml"
	"$T/nddmilter" report --socket "$T/run/report.sock" --reporter "t$i" --kind spam <"$T/third-$i.eml" >>"$T/report.log" 2>&1 ||
		fail "(e) report over the socket"
done
ok=1
for i in 1 2 3 4 5 6 7 8 9; do
	wait_has 30 u$i Junk "third-u$i@invest.example" && ! has u$i INBOX "third-u$i@invest.example" || { ok=; fail "(e) u$i's third copy not moved over IMAP"; }
done
[ -n "$ok" ] && pass "(e) over IMAP with the master user, the nine unread copies of the third campaign are in Junk"
ID3=$(grep -o '"msg":"zap: campaign reached the trigger","campaign":[0-9]*' "$T/nddmilter.log" | tail -1 | grep -o '[0-9]*$')
out=$(NDDMILTER_API_TOKEN=$TOKEN "$T/nddmilter" --config "$T/nddmilter-imap.yaml" campaigns purges "${ID3:-0}" 2>"$T/purges.log")
if echo "$out" | grep -qE "to Junk +9 jobs: 9 moved" && grep -q "using its API" "$T/purges.log"; then
	pass "(e) campaigns purges $ID3, through the daemon's API: $(echo "$out" | grep 'to Junk' | sed 's/^ *//')"
else
	fail "(e) campaigns purges ${ID3:-none}: $out $(cat "$T/purges.log")"
fi
out=$(NDDMILTER_API_TOKEN=$TOKEN "$T/nddmilter" --config "$T/nddmilter-imap.yaml" campaigns undo-purge "${ID3:-0}" 2>>"$T/purges.log")
echo "$out" | grep -q "purge undone, 9 copies to move back (now)" && pass "(e) $out" || fail "(e) campaigns undo-purge: $out"
ok=1
for i in 1 2 3 4 5 6 7 8 9; do
	wait_has 30 u$i INBOX "third-u$i@invest.example" && ! has u$i Junk "third-u$i@invest.example" || { ok=; fail "(e) u$i's third copy not back in INBOX"; }
done
[ -n "$ok" ] && pass "(e) undo-purge: the nine moved copies are back in INBOX"
# (The master user's IMAP moves run contrib/dovecot's IMAPSieve rules as
# the users' own: the moves back out of Junk count as not-spam reports,
# which may revoke the campaign. It is never allowed by the undo.)
state=$(api "http://127.0.0.1:$HTTP_PORT/v1/campaigns/${ID3:-0}" | grep -o '"state": "[a-z]*"')
[ -n "$state" ] && [ "$state" != '"state": "allowed"' ] &&
	pass "(e) the undo did not allow the campaign ($state)" || fail "(e) the campaign after the undo: ${state:-unknown}"
