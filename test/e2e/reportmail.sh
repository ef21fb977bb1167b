#!/usr/bin/env bash
# End-to-end test: junk reports sent by mail through a real Postfix.
#
# Builds nddmilter, runs a private Postfix instance on loopback with SMTP
# AUTH (Cyrus SASL, a private sasldb with a test user) and smtp-sink as the
# next hop, nddmilter with a spam report address and a feedback loop, and
# proves:
#   a) Postfix negotiated SMFIF_SETSYMLIST: nddmilter asked for {auth_authen}
#      although this Postfix's milter_mail_macros does not name it;
#   b) a message forwarding a campaign copy as an attachment, sent to the
#      report address WITHOUT authentication, is not a report: it is
#      delivered as any mail (with its verdict header), no campaign exists,
#      and the log says why;
#   c) the same message from the authenticated user alice is taken: the
#      submission gets 250, the message is not delivered (discarded), the
#      log names the reporter (the SASL login), a campaign exists, and a
#      randomized copy of the campaign sent through Postfix is then acted
#      on (tagged: one reporter);
#   d) an ARF report from the feedback loop's client address and sender
#      domain is taken with the reporter fbl:NAME; the same ARF report from
#      another client address is delivered as any mail;
#   e) a report message from alice to the report address and to bob is
#      taken, and delivered to bob only (the milter removed the report
#      address).
# Installs postfix, swaks, sasl2-bin and libsasl2-modules from Debian's
# packages when missing (root). Cleans up after itself, bounded in time;
# prints "N passed, N failed" and exits non-zero on failure.
# Environment: NDD_E2E_TIMEOUT (seconds, default 150), NDD_E2E_KEEP (a
# folder to keep the logs in), NDD_BIN (a built nddmilter to test).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export PATH=$PATH:/usr/local/go/bin:/usr/sbin:/sbin
TIME_LIMIT=${NDD_E2E_TIMEOUT:-150}

# pass, fail, die, free_port, wait_port, the watchdog, summary_exit.
. "$ROOT/test/e2e/lib.sh"

# --- prerequisites -----------------------------------------------------------
skip_unless_root "the report-by-mail end-to-end test needs root (Postfix's own user and queue)"
sasl_plugins() { ls /usr/lib/*/sasl2/libplain.so* /usr/lib/*/sasl2/libsasldb.so* >/dev/null 2>&1; }
sasl_plugins || apt_install libsasl2-modules libsasl2-modules-db
install_postfix
install_commands saslpasswd2=sasl2-bin curl
for c in postfix postconf smtp-sink swaks saslpasswd2 curl go; do
	command -v $c >/dev/null || die "missing command: $c"
done

# --- workspace, cleanup and time bound ---------------------------------------
T=$(mktemp -d /tmp/ndd-e2e-reportmail.XXXXXX)
chmod 755 "$T"
PF=$T/postfix
NDD_PID=
SINK_PID=
PF_PID=

cleanup() {
	local rc=$? pid
	stop_watchdog
	[ -n "$NDD_PID" ] && kill -TERM "$NDD_PID" 2>/dev/null && wait "$NDD_PID" 2>/dev/null
	pid=$(cat "$T/queue/pid/master.pid" 2>/dev/null | tr -d ' ')
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null
	[ -n "$PF_PID" ] && wait "$PF_PID" 2>/dev/null
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
FBL_CLIENT=127.0.0.2 # the feedback loop's SMTP client address (loopback)

# --- build nddmilter (or take NDD_BIN) ---------------------------------------
if [ -n "${NDD_BIN:-}" ]; then
	cp "$NDD_BIN" "$T/nddmilter" || die "NDD_BIN: cannot copy $NDD_BIN"
else
	echo "== building nddmilter"
	(cd "$ROOT" && go build -o "$T/nddmilter" ./cmd/nddmilter) || die "go build failed"
fi

# --- smtp-sink: the next hop that keeps every delivered message --------------
mkdir -p "$T/sink"
chown postfix "$T/sink"
smtp-sink -u postfix -d "$T/sink/%M." -c 127.0.0.1:$SINK_PORT 100 >"$T/sink.log" 2>&1 &
SINK_PID=$!
wait_port $SINK_PORT 5 || die "smtp-sink did not start"

# --- SMTP AUTH: Cyrus SASL with a private sasldb and one user -----------------
# (Debian's Postfix reads CONFIG_DIRECTORY/sasl/smtpd.conf, whatever
# cyrus_sasl_config_path says; upstream's reads cyrus_sasl_config_path.)
mkdir -p "$T/sasl" "$PF/sasl"
cat >"$PF/sasl/smtpd.conf" <<EOF
pwcheck_method: auxprop
auxprop_plugin: sasldb
mech_list: PLAIN LOGIN
sasldb_path: $T/sasl/sasldb2
EOF
echo 'alice-secret' | saslpasswd2 -p -c -f "$T/sasl/sasldb2" -u e2e.test.local alice ||
	die "saslpasswd2 failed"
chgrp postfix "$T/sasl/sasldb2" && chmod 640 "$T/sasl/sasldb2"

# --- private Postfix instance -------------------------------------------------
mkdir -p "$T/queue" "$T/data"
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
smtpd_relay_restrictions = permit_sasl_authenticated, permit_mynetworks, reject
maillog_file = $T/postfix.log
maillog_file_prefixes = $T
# SMTP AUTH (submission) with Cyrus SASL
smtpd_sasl_auth_enable = yes
smtpd_sasl_type = cyrus
smtpd_sasl_path = smtpd
cyrus_sasl_config_path = $PF/sasl
smtpd_sasl_security_options = noanonymous
# nddmilter, as in contrib/postfix/main.cf.snippet. milter_mail_macros
# leaves {auth_authen} out on purpose: nddmilter asks for it itself
# (protocol 6, SMFIF_SETSYMLIST).
smtpd_milters = inet:127.0.0.1:$MILTER_PORT
non_smtpd_milters = \$smtpd_milters
milter_default_action = accept
milter_protocol = 6
milter_connect_timeout = 5s
milter_command_timeout = 5s
milter_content_timeout = 20s
milter_mail_macros = i {mail_addr}
milter_end_of_data_macros = i
EOF
postconf -c "$PF" -F '*/*/chroot = n'
postconf -c "$PF" -M smtp/inet="127.0.0.1:$SMTP_PORT inet n - n - - smtpd"
postfix -c "$PF" check >"$T/postfix-check.log" 2>&1 || { cat "$T/postfix-check.log"; die "postfix check failed"; }
postfix -c "$PF" start-fg >>"$T/postfix-fg.log" 2>&1 &
PF_PID=$!
wait_port $SMTP_PORT 15 || die "postfix did not start"

# --- nddmilter ----------------------------------------------------------------
cat >"$T/nddmilter.yaml" <<EOF
milter:
  listen: inet:127.0.0.1:$MILTER_PORT
http:
  listen: 127.0.0.1:$HTTP_PORT
  token: $TOKEN
store:
  dir: $T/store
log:
  format: json
  level: debug
reports:
  spam_addresses: [spam-report@example.org]
  deliver: discard
  feedback_loops:
    - name: isp
      networks: [$FBL_CLIENT/32]
      senders: ["@fbl.isp.example"]
EOF
"$T/nddmilter" serve --config "$T/nddmilter.yaml" >>"$T/nddmilter.log" 2>&1 &
NDD_PID=$!
ready=
for _ in $(seq 100); do
	curl -sf "http://127.0.0.1:$HTTP_PORT/readyz" >/dev/null 2>&1 && { ready=1; break; }
	kill -0 $NDD_PID 2>/dev/null || break
	sleep 0.1
done
[ -n "$ready" ] || die "nddmilter did not become ready"
pass "nddmilter is ready, with a report address and a feedback loop"

# --- messages -----------------------------------------------------------------
CAMPAIGN_TEXT="Dear friend, we are pleased to announce that your account has been selected
for an exclusive investment opportunity with guaranteed monthly returns. Our
financial advisors have prepared a personal portfolio proposal for you. Please
confirm your participation by visiting our secure website and entering your
banking details before the offer expires at the end of this week. Thousands of
satisfied customers have already doubled their savings with our program.
Remember that this invitation is strictly personal and cannot be transferred.
Kind regards, the international investment department."

campaign_copy() { # n: a randomized copy (a greeting and a reference changed)
	local greet=(friend customer client member partner)
	printf '%s\n\nReference number %s.\n' "${CAMPAIGN_TEXT/friend/${greet[$(($1 % 5))]}}" "$((1000 + $1 * 7))"
}

spam_eml() { # n: the spam as the user received it
	printf 'From: Investments <offers@invest.example>\nTo: alice@example.org\nSubject: Exclusive investment opportunity\nMessage-ID: <spam-%s@invest.example>\n\n%s\n' \
		"$1" "$(campaign_copy "$1")"
}

# forward_eml NAME: the spam forwarded as an attachment ("forward as
# attachment") to the report address.
forward_eml() {
	cat <<EOF
From: Alice <alice@example.org>
To: spam-report@example.org
Subject: Fwd: Exclusive investment opportunity
X-E2E-Test: $1
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="fwd-boundary"

--fwd-boundary
Content-Type: text/plain

Spam, see the attached message.

--fwd-boundary
Content-Type: message/rfc822
Content-Disposition: attachment; filename="spam.eml"

$(spam_eml 1)

--fwd-boundary--
EOF
}

# arf_eml NAME SENDER: an ARF feedback report (RFC 5965) of a spam copy.
arf_eml() {
	cat <<EOF
From: Feedback <$2>
To: spam-report@example.org
Subject: Abuse report
X-E2E-Test: $1
MIME-Version: 1.0
Content-Type: multipart/report; report-type=feedback-report; boundary="arf-boundary"

--arf-boundary
Content-Type: text/plain

This is an abuse report for a message received from 192.0.2.1.

--arf-boundary
Content-Type: message/feedback-report

Feedback-Type: abuse
User-Agent: e2e/1.0
Version: 1

--arf-boundary
Content-Type: message/rfc822

$(spam_eml 2)

--arf-boundary--
EOF
}

swaks_data() { # name file [swaks args...]: sends the file as the message data
	local name=$1 file=$2
	shift 2
	swaks --server 127.0.0.1:$SMTP_PORT --to spam-report@example.org --data "@$file" --timeout 30 "$@" \
		>"$T/swaks-$name.log" 2>&1
}

sink_file() { # X-E2E-Test name -> file, waiting up to SECONDS (default 10)
	local f
	for _ in $(seq $((${2:-10} * 10))); do
		f=$(grep -l "^X-E2E-Test: $1\$" "$T"/sink/* 2>/dev/null | head -1)
		[ -n "$f" ] && { echo "$f"; return 0; }
		sleep 0.1
	done
	return 1
}

campaigns() { # the number of campaigns in the store, through the API
	curl -s -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$HTTP_PORT/v1/campaigns" | grep -o '"id":[0-9]*' | wc -l
}

log_has() { # pattern: waits up to 5 s for a line of the daemon's log
	for _ in $(seq 50); do
		grep -q "$1" "$T/nddmilter.log" && return 0
		sleep 0.1
	done
	return 1
}

# (b) unauthenticated: delivered as any mail, no report.
forward_eml unauth >"$T/unauth.eml"
swaks_data unauth "$T/unauth.eml" --from alice@example.org
if f=$(sink_file unauth) && grep -q '^X-NDD-Verdict: accept' "$f"; then
	pass "(b) unauthenticated mail to the report address delivered as any mail: $(grep '^X-NDD-Verdict:' "$f")"
else
	fail "(b) unauthenticated mail to the report address not delivered with a verdict"
	tail -5 "$T/swaks-unauth.log"
fi
log_has 'unauthenticated sender: not a report' &&
	pass "(b) the log says why: $(grep -o '"msg":"[^"]*unauthenticated[^"]*"' "$T/nddmilter.log" | head -1)" ||
	fail "(b) no log line for the unauthenticated report message"
n=$(campaigns)
[ "$n" = 0 ] && pass "(b) no campaign created" || fail "(b) $n campaigns after an unauthenticated report message"

# (a) the macro negotiation.
if grep '"msg":"milter connection negotiated"' "$T/nddmilter.log" | grep -q '"actions":"0x1[0-9a-f][0-9a-f]"'; then
	pass "(a) Postfix granted SMFIF_SETSYMLIST: $(grep -o '"msg":"milter connection negotiated"[^}]*' "$T/nddmilter.log" | head -1 | grep -o '"actions":"[^"]*"')"
else
	fail "(a) SMFIF_SETSYMLIST not negotiated: $(grep 'negotiated' "$T/nddmilter.log" | head -1)"
fi

# (c) authenticated: taken as a report with the SASL login, not delivered.
forward_eml auth >"$T/auth.eml"
swaks_data auth "$T/auth.eml" --from alice@example.org --auth PLAIN --auth-user alice --auth-password alice-secret
if grep -q '<- *235 ' "$T/swaks-auth.log" && grep -q '<- *250 .*queued' "$T/swaks-auth.log"; then
	pass "(c) authenticated submission to the report address accepted (235 AUTH, 250 queued)"
else
	fail "(c) authenticated submission: $(grep -E '^<[-~*]' "$T/swaks-auth.log" | tail -3 | tr '\n' ' ')"
fi
if log_has '"msg":"report by mail"'; then
	line=$(grep '"msg":"report by mail"' "$T/nddmilter.log" | head -1)
	if echo "$line" | grep -q '"reporter":"alice[@"]' && echo "$line" | grep -q '"source":"sasl"' && echo "$line" | grep -q '"created":1'; then
		pass "(c) report taken with the SASL login as reporter: $(echo "$line" | grep -o '"reporter":"[^"]*"'), created 1"
	else
		fail "(c) report by mail: $line"
	fi
else
	fail "(c) no report by mail in the log"
fi
sleep 1
sink_file auth 1 >/dev/null && fail "(c) the report message was delivered (deliver: discard)" ||
	pass "(c) the report message was not delivered (discarded)"
n=$(campaigns)
[ "$n" = 1 ] && pass "(c) one campaign in the store" || fail "(c) $n campaigns, want 1"
# A randomized copy of the campaign through Postfix is now acted on.
spam_eml 7 | sed 's/^To: alice@example.org/To: bob@example.org\nX-E2E-Test: copy/' >"$T/copy.eml"
swaks --server 127.0.0.1:$SMTP_PORT --from offers@invest.example --to bob@example.org --data "@$T/copy.eml" \
	--timeout 30 >"$T/swaks-copy.log" 2>&1
if f=$(sink_file copy) && grep -q '^X-NDD-Verdict: tag;' "$f" && grep -q '^X-NDD-Campaign: [0-9]' "$f"; then
	pass "(c) a randomized copy is tagged: $(grep '^X-NDD-Campaign:' "$f")"
else
	fail "(c) randomized copy not tagged: $(grep -i '^X-NDD' "$f" 2>/dev/null | tr '\n' ' ')"
fi

# (d) feedback loop: from its client address and sender domain, a report
# with the reporter fbl:isp; from another client address, any mail.
arf_eml fbl complaints@fbl.isp.example >"$T/fbl.eml"
swaks_data fbl "$T/fbl.eml" --from complaints@fbl.isp.example --local-interface $FBL_CLIENT
if log_has '"reporter":"fbl:isp"'; then
	pass "(d) ARF report from the feedback loop taken: $(grep '"reporter":"fbl:isp"' "$T/nddmilter.log" | grep -o '"kind":"[^"]*".*"joined":[0-9]*' | head -1)"
else
	fail "(d) no report with the reporter fbl:isp"
	tail -3 "$T/swaks-fbl.log"
fi
sleep 1
sink_file fbl 1 >/dev/null && fail "(d) the feedback report was delivered" || pass "(d) the feedback report was not delivered"
arf_eml fblout complaints@fbl.isp.example >"$T/fblout.eml"
swaks_data fblout "$T/fblout.eml" --from complaints@fbl.isp.example
if f=$(sink_file fblout) && grep -q '^X-NDD-Verdict:' "$f"; then
	pass "(d) the same ARF report from another client address delivered as any mail"
else
	fail "(d) ARF report from outside the feedback loop's network not delivered"
fi
n=$(grep -c '"msg":"report by mail"' "$T/nddmilter.log")
[ "$n" = 2 ] && pass "(d) two reports by mail in all" || fail "(d) $n reports by mail, want 2"

# (e) to the report address and another recipient: the report is taken and
# the message goes to the other recipient only.
forward_eml mixed >"$T/mixed.eml"
swaks_data mixed "$T/mixed.eml" --to spam-report@example.org,bob@example.org --from alice@example.org \
	--auth PLAIN --auth-user alice --auth-password alice-secret
qid=$(grep -o '<- *250 .*queued as [0-9A-F]*' "$T/swaks-mixed.log" | grep -o '[0-9A-F]*$')
if f=$(sink_file mixed); then
	sleep 1
	if grep -q "$qid: to=<bob@example.org>.*status=sent" "$T/postfix.log" && ! grep -q "$qid: to=<spam-report@example.org>" "$T/postfix.log"; then
		pass "(e) report message also to bob: delivered to bob only ($qid)"
	else
		fail "(e) $qid: $(grep "$qid: to=" "$T/postfix.log" | tr '\n' ' ')"
	fi
else
	fail "(e) report message also to bob not delivered to bob: $(grep -E '^<[-~*]' "$T/swaks-mixed.log" | tail -2 | tr '\n' ' ')"
fi
n=$(grep -c '"msg":"report by mail"' "$T/nddmilter.log")
[ "$n" = 3 ] && pass "(e) three reports by mail in all" || fail "(e) $n reports by mail, want 3"
