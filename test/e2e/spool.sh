#!/usr/bin/env bash
# End-to-end test: the report spool against a member of its own group.
#
# Sets the spool up as contrib/dovecot did before it asked for the sticky
# bit (mode 2770, the mail-delivery user's group), runs the daemon (root)
# with its HTTP API on loopback, and, as a user of that group whom the
# report socket does not admit (ndd-mallory, through runuser), performs
# each attack of issue #29's first finding. Proves:
#   a) bad/ replaced by a symlink to the store, with a file named
#      api-token in new/: the spool is refused and logged; the store's
#      api-token is untouched;
#   b) new/ replaced by a symlink to the store: refused; no store file
#      moved;
#   c) tmp/ replaced by a symlink to a directory of old files: refused;
#      none of them removed;
#   d) reports written straight into new/ with any reporter name, by hand
#      and by `nddmilter report --spool`: refused (owner not admitted),
#      logged with the owner's uid, removed, not ingested;
#   e) a symlink to the api-token and a hard link in new/: refused and
#      logged; the api-token untouched;
#   f) a report the delivery user spools is ingested, under its reporter;
#   g) with mode 3770 (contrib/dovecot now) the group cannot rename new/.
# Root only (it creates two users, removed at the end). Bounded in time;
# cleans up after itself; prints "N passed, N failed" and exits non-zero on
# failure. Environment: NDD_E2E_TIMEOUT (seconds, default 180),
# NDD_E2E_KEEP (a folder to keep the logs in), NDD_BIN (a built nddmilter
# to test).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export PATH=$PATH:/usr/local/go/bin:/usr/sbin:/sbin
TIME_LIMIT=${NDD_E2E_TIMEOUT:-180}

# pass, fail, die, free_port, wait_port, the watchdog, summary_exit.
. "$ROOT/test/e2e/lib.sh"

skip_unless_root "the spool end-to-end test needs root (it creates users and runs commands as them)"
install_commands curl runuser=util-linux python3 sha256sum=coreutils

# The delivery user (admitted by the report socket) and a user in its
# group that is not; removed at the end when this script created them.
VMAIL=ndd-spool-vmail
MALLORY=ndd-mallory
CREATED_USERS=
if ! id -u $VMAIL >/dev/null 2>&1; then
	useradd --system --user-group --no-create-home --shell /bin/sh $VMAIL || die "cannot create user $VMAIL"
	CREATED_USERS="$VMAIL"
fi
if ! id -u $MALLORY >/dev/null 2>&1; then
	useradd --system --user-group --groups $VMAIL --no-create-home --shell /bin/sh $MALLORY || die "cannot create user $MALLORY"
	CREATED_USERS="$MALLORY $CREATED_USERS"
fi
id -nG $MALLORY | grep -qw $VMAIL || die "$MALLORY is not in group $VMAIL"
MALLORY_UID=$(id -u $MALLORY)

# --- workspace, cleanup and time bound ---------------------------------------
T=$(mktemp -d /tmp/ndd-e2e-spool.XXXXXX)
chmod 755 "$T"
SP=$T/spool
NDD_PID=
cleanup() {
	local rc=$?
	stop_watchdog
	stop_pid "$NDD_PID"
	if [ "$failed" -gt 0 ] || [ "$rc" -ne 0 ]; then
		echo "--- nddmilter log (tail)"
		tail -30 "$T/nddmilter.log" 2>/dev/null
	fi
	keep_logs '*.log'
	rm -rf "$T"
	for u in $CREATED_USERS; do # mallory first: she is in the other's group
		userdel "$u" 2>/dev/null
	done
	case "$CREATED_USERS" in *$VMAIL*) getent group $VMAIL >/dev/null && groupdel $VMAIL 2>/dev/null ;; esac
	summary_exit "$rc"
}
trap cleanup EXIT
start_watchdog
free_port
MILTER_PORT=$PORT
free_port
HTTP_PORT=$PORT

build_nddmilter
chmod 755 "$NDD"

# --- the spool as contrib/dovecot set it up, the daemon ----------------------
install -d -m 2770 -o root -g $VMAIL "$SP"
mkdir -p "$T/run" "$T/msgs"
cat >"$T/nddmilter.yaml" <<EOF
milter:
  listen: inet:127.0.0.1:$MILTER_PORT
http:
  listen: 127.0.0.1:$HTTP_PORT
api:
  socket: $T/run/report.sock
  socket_group: $VMAIL
  allow_users: [$VMAIL]
  spool_dir: $SP
  spool_interval: 1s
store:
  dir: $T/store
log:
  format: json
EOF
"$NDD" serve --config "$T/nddmilter.yaml" >>"$T/nddmilter.log" 2>&1 &
NDD_PID=$!
for _ in $(seq 100); do
	curl -sf "http://127.0.0.1:$HTTP_PORT/readyz" >/dev/null 2>&1 && [ -s "$T/store/api-token" ] && break
	kill -0 $NDD_PID 2>/dev/null || break
	sleep 0.1
done
curl -sf "http://127.0.0.1:$HTTP_PORT/readyz" >/dev/null 2>&1 || die "nddmilter serve did not become ready"
TOKEN=$(cat "$T/store/api-token")
TOKEN_SUM=$(sha256sum <"$T/store/api-token")
ls -1 "$T/store" | sort >"$T/store-files.before"
pass "nddmilter is ready; spool $(stat -c '%a %U:%G' "$SP"), its tmp/new/bad $(stat -c '%a' "$SP/tmp" "$SP/new" "$SP/bad" | paste -sd/); store holds $(wc -l <"$T/store-files.before") files"

# as_mallory CMD: runs the shell command CMD as the group member.
as_mallory() { runuser -u $MALLORY -- sh -c "umask 022; $1"; }

# log_count STRING: lines of the daemon's log holding the fixed string.
log_count() { grep -cF -- "$1" "$T/nddmilter.log"; }
# wait_log STRING N: until at least N lines of the log hold STRING (10 s).
wait_log() {
	for _ in $(seq 100); do
		[ "$(log_count "$1")" -ge "$2" ] && return 0
		sleep 0.1
	done
	return 1
}
# store_intact: the api-token is the same and every file the store had
# is still there (none moved out); prints what differs.
store_intact() {
	local ok=0
	[ "$(sha256sum <"$T/store/api-token" 2>/dev/null)" = "$TOKEN_SUM" ] || { echo "api-token changed or gone"; ok=1; }
	local gone
	gone=$(ls -1 "$T/store" | sort | comm -23 "$T/store-files.before" -)
	[ -z "$gone" ] || { echo "store files gone: $gone"; ok=1; }
	return $ok
}
# repair SUB: puts the spool's SUB back after an attack (as the
# administrator would).
repair() { rm -f "$SP/$1" && mv "$SP/$1.m" "$SP/$1"; }
# campaign_of FILE: the campaign a message is in, by the API's dry-run
# check (0 if none).
campaign_of() {
	curl -s -H "Authorization: Bearer $TOKEN" --data-binary @"$1" "http://127.0.0.1:$HTTP_PORT/v1/check" |
		python3 -c 'import json,sys; print(json.load(sys.stdin).get("campaign") or 0)'
}
msg() { # FILE SUBJECT TEXT
	printf 'From: Offers <offers@spool.example>\nTo: user@example.org\nSubject: %s\nMessage-ID: <%s@spool.example>\n\n%s\n' \
		"$2" "$(basename "$1")" "$3" >"$1"
	chmod 644 "$1"
}
FORGED_TEXT="Dear customer, your mailbox storage is almost full and incoming messages will be
rejected from tomorrow. To keep receiving your mail, confirm your account details
through our secure upgrade portal within twenty four hours. Failure to verify will
result in permanent suspension of your address and the loss of all stored messages.
The upgrade is free of charge for all customers who respond before the deadline."
LEGIT_TEXT="Congratulations! Your address was chosen among our loyal customers to receive a
genuine Swiss luxury chronograph, absolutely free of charge, as part of our
anniversary celebration. To claim it, confirm your shipping details and cover a
small handling fee. Quantities are strictly limited and unclaimed prizes go to the
next winner on our waiting list. Reply today to secure your prize."
msg "$T/msgs/forged.eml" "Mailbox full" "$FORGED_TEXT"
msg "$T/msgs/legit.eml" "Claim your chronograph" "$LEGIT_TEXT"
REFUSED='"msg":"spool refused'
ENTRY='"msg":"spool: entry refused'

out=
# (a) bad/ -> the store, a file named api-token in new/.
n=$(log_count "$REFUSED")
as_mallory "printf 'attacker-token\n' >$SP/new/api-token && mv $SP/bad $SP/bad.m && ln -s $T/store $SP/bad" || fail "(a) mallory's setup"
if wait_log "$REFUSED" $((n + 1)) && sleep 1.5 && out=$(store_intact) && grep -F "$REFUSED" "$T/nddmilter.log" | tail -1 | grep -q 'bad is a symlink'; then
	pass "(a) bad/ a symlink to the store: the spool is refused and logged ($(grep -F "$REFUSED" "$T/nddmilter.log" | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["err"])')); the store's api-token is untouched"
else
	fail "(a) bad/ a symlink to the store: ${out:-no refusal logged}"
fi
repair bad

out=
# (b) new/ -> the store.
n=$(log_count "$REFUSED")
as_mallory "mv $SP/new $SP/new.m && ln -s $T/store $SP/new" || fail "(b) mallory's setup"
if wait_log "$REFUSED" $((n + 1)) && sleep 1.5 && out=$(store_intact) && [ -z "$(ls -A "$SP/bad")" ]; then
	pass "(b) new/ a symlink to the store: refused and logged; no store file moved (bad/ empty)"
else
	fail "(b) new/ a symlink to the store: ${out:-no refusal logged}; bad/ holds $(ls "$SP/bad" | head -5 | paste -sd' ')"
fi
repair new

out=
# (c) tmp/ -> a directory of files two hours old.
mkdir -p "$T/victim"
for f in one two three; do echo "$f" >"$T/victim/$f"; done
touch -d '2 hours ago' "$T"/victim/*
n=$(log_count "$REFUSED")
as_mallory "mv $SP/tmp $SP/tmp.m && ln -s $T/victim $SP/tmp" || fail "(c) mallory's setup"
if wait_log "$REFUSED" $((n + 1)) && sleep 1.5 && [ "$(ls "$T/victim" | wc -l)" = 3 ]; then
	pass "(c) tmp/ a symlink to a directory of old files: refused and logged; none of its files removed"
else
	fail "(c) tmp/ a symlink: victim directory holds $(ls "$T/victim" | paste -sd' ')"
fi
repair tmp

out=
# (d) forged reports straight into new/, by hand and through the report
# command's spool (as the pipe program would), with the daemon's socket
# out of reach; and the api-token file of (a), left in new/ (the first
# entries refused since the start).
as_mallory "{ printf 'kind=spam&reporter=forged%%40example.org&time=2024-05-01T10%%3A00%%3A00Z&v=1\n'; cat $T/msgs/forged.eml; } >$SP/new/1700000000000000000.1.forged" ||
	fail "(d) mallory's forged file"
out=$(as_mallory "$NDD report --socket $T/run/none.sock --spool $SP --reporter forged2@example.org --kind spam -v <$T/msgs/forged.eml" 2>&1)
case "$out" in *spooled*) ;; *) fail "(d) mallory's report --spool: $out" ;; esac
if wait_log "$ENTRY" 3 && [ -z "$(ls -A "$SP/new")" ] &&
	[ "$(grep -F "$ENTRY" "$T/nddmilter.log" | grep -c "owned by uid $MALLORY_UID, which may not report")" -ge 3 ] &&
	[ "$(campaign_of "$T/msgs/forged.eml")" = 0 ]; then
	pass "(d) 3 files of uid $MALLORY_UID in new/ (api-token, a forged report, a report --spool) refused, logged with the owner's uid, removed; the forged message is in no campaign"
else
	fail "(d) forged reports: $(log_count "$ENTRY") refusals logged (want 3), new/ holds $(ls -A "$SP/new" | paste -sd' '), campaign $(campaign_of "$T/msgs/forged.eml")"
fi

out=
# (e) a symlink to the api-token and a hard link of a file of mallory's in new/.
n=$(log_count "$ENTRY")
as_mallory "ln -s $T/store/api-token $SP/new/1700000000000000001.1.link && mkdir -p $SP/tmp/m && printf x >$SP/tmp/m/f && ln $SP/tmp/m/f $SP/new/1700000000000000002.1.hard" ||
	fail "(e) mallory's links"
if wait_log "$ENTRY" $((n + 2)) && out=$(store_intact) &&
	grep -F "$ENTRY" "$T/nddmilter.log" | grep -q '"reason":"a symlink, not a regular file"' &&
	grep -F "$ENTRY" "$T/nddmilter.log" | grep -q '"reason":"a hard link (2 names)'; then
	pass "(e) a symlink to the api-token and a hard link in new/: refused and logged (symlink, hard link), removed; the api-token untouched"
else
	fail "(e) links in new/: ${out:-} $(grep -F "$ENTRY" "$T/nddmilter.log" | tail -2)"
fi
rm -rf "$SP/tmp/m"

out=
# (f) the delivery user's spooled report is ingested.
out=$(runuser -u $VMAIL -- "$NDD" report --socket "$T/run/none.sock" --spool "$SP" --reporter alice@example.org --kind spam -v <"$T/msgs/legit.eml" 2>&1)
ID=0
for _ in $(seq 50); do
	ID=$(campaign_of "$T/msgs/legit.eml")
	[ "$ID" != 0 ] && break
	sleep 0.2
done
if [ "$ID" != 0 ] && [ -z "$(ls -A "$SP/new")" ] && [ "$(log_count '"msg":"spooled reports ingested"')" -ge 1 ]; then
	pass "(f) the report $VMAIL spooled ($(echo "$out" | head -1 | cut -c1-60)...) was ingested: campaign $ID"
else
	fail "(f) $VMAIL's spooled report: $out; campaign $ID; new/ holds $(ls -A "$SP/new" | paste -sd' ')"
fi
refused=$(curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | awk '/^nddmilter_errors_total\{stage="spool_refused"\}/ { print $2 }')
if [ "${refused:-0}" -ge 8 ]; then
	pass "every refusal counted: nddmilter_errors_total{stage=\"spool_refused\"} $refused"
else
	fail "nddmilter_errors_total{stage=\"spool_refused\"} ${refused:-absent}, want at least 8"
fi

# (g) with the sticky bit the kernel keeps the group from renaming new/.
chmod 3770 "$SP"
if ! as_mallory "mv $SP/new $SP/new.m" 2>/dev/null && [ -d "$SP/new" ] && [ ! -L "$SP/new" ]; then
	pass "(g) spool mode 3770: $MALLORY cannot rename new/"
else
	fail "(g) spool mode 3770: $MALLORY renamed new/"
	[ -e "$SP/new.m" ] && mv "$SP/new.m" "$SP/new"
fi
if store_intact >/dev/null; then
	pass "the store still holds all its files and the same api-token"
else
	fail "the store at the end: $(store_intact)"
fi
