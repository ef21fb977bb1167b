# Helpers shared by the end-to-end scripts (sourced, not run): installing
# Debian packages (apt_install, install_commands, install_postfix), counting
# results, free loopback ports, waiting on a port, stopping a process, and
# the watchdog that bounds a script's time. The sourcing script sets T (its workspace) and
# TIME_LIMIT (seconds) before calling start_watchdog, and calls
# stop_watchdog in its cleanup.

passed=0
failed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
die() {
	echo "FATAL: $*"
	failed=$((failed + 1))
	exit 1
}

# skip_unless_root WHAT: ends the script, skipped, when not run as root
# (WHAT: what the test needs root for).
skip_unless_root() {
	[ "$(id -u)" = 0 ] && return 0
	echo "SKIP: $*"
	echo "0 passed, 0 failed"
	exit 0
}

# stop_pid PID [SIGNAL]: signals PID (default TERM) and waits for it,
# at most 10 s, then kills it.
stop_pid() { # pid [signal]: signal it and wait for it (bounded: 10 s)
	local pid=$1
	[ -n "$pid" ] || return 0
	kill -"${2:-TERM}" "$pid" 2>/dev/null || return 0
	for _ in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	return 0
}

# free_port sets PORT to a loopback port below the kernel's ephemeral range
# (32768-60999) that nobody listens on and that this script has not taken.
USED_PORTS=" "
free_port() {
	local p
	for _ in $(seq 200); do
		p=$((12000 + RANDOM % 20000))
		case "$USED_PORTS" in *" $p "*) continue ;; esac
		if ! (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null; then
			USED_PORTS="$USED_PORTS$p "
			PORT=$p
			return
		fi
	done
	die "no free port"
}

# wait_port PORT SECONDS: until something listens on 127.0.0.1:PORT.
wait_port() {
	for _ in $(seq $(($2 * 10))); do
		(exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# start_watchdog: SIGTERM to this script after TIME_LIMIT seconds (its TERM
# trap then fails it and cleans up).
start_watchdog() {
	trap 'echo "FATAL: interrupted or over ${TIME_LIMIT}s"; failed=$((failed + 1)); exit 1' TERM INT
	(
		exec >/dev/null 2>&1
		sleep "$TIME_LIMIT" &
		echo $! >"$T/watchdog-sleep.pid"
		wait $!
		kill -TERM $$
	) &
	WATCHDOG=$!
}

stop_watchdog() {
	if [ -n "${WATCHDOG:-}" ]; then
		kill "$WATCHDOG" 2>/dev/null
		wait "$WATCHDOG" 2>/dev/null
		kill "$(cat "$T/watchdog-sleep.pid" 2>/dev/null)" 2>/dev/null
	fi
}

# keep_logs GLOB...: copies the files of $T matching each GLOB to the
# folder NDD_E2E_KEEP names, when it is set (for a failure's logs).
keep_logs() {
	[ -n "${NDD_E2E_KEEP:-}" ] || return 0
	mkdir -p "$NDD_E2E_KEEP" || return 0
	local g
	for g in "$@"; do
		# shellcheck disable=SC2086 # the glob is meant to expand
		cp "$T"/$g "$NDD_E2E_KEEP"/ 2>/dev/null
	done
	return 0
}

# summary_exit RC: prints the counts and exits non-zero on any failure.
summary_exit() {
	echo "$passed passed, $failed failed"
	if [ "$failed" -gt 0 ] || [ "$1" -ne 0 ]; then
		exit 1
	fi
	exit 0
}

# build_nddmilter: $T/nddmilter, copied from NDD_BIN when set (a built or
# installed binary to test), else built from $ROOT; sets NDD to it.
build_nddmilter() {
	if [ -n "${NDD_BIN:-}" ]; then
		echo "== testing $NDD_BIN"
		cp "$NDD_BIN" "$T/nddmilter" || die "NDD_BIN: cannot copy $NDD_BIN"
	else
		echo "== building nddmilter"
		(cd "$ROOT" && go build -o "$T/nddmilter" ./cmd/nddmilter) || die "go build failed"
	fi
	NDD=$T/nddmilter
}

# build_nddlab: $T/nddlab, the measurement tools (bench flood, bench
# serve, lexicon show), built from $ROOT (the package does not ship it);
# sets LAB to it.
build_nddlab() {
	[ -n "${LAB:-}" ] && return
	echo "== building nddlab"
	(cd "$ROOT" && go build -o "$T/nddlab" ./cmd/nddlab) || die "go build ./cmd/nddlab failed"
	LAB=$T/nddlab
}

# lexicon_words: the embedded lexicon's words (4 letters or more) into
# $T/words, for campaign_text.
lexicon_words() {
	build_nddlab
	"$LAB" lexicon show --default --list primary 2>/dev/null | awk 'NR > 2 { print $1 }' | grep -E '^[a-z]{4,}$' >"$T/words"
	[ "$(wc -l <"$T/words")" -gt 100 ] || die "cannot list the lexicon's words"
}

# campaign_text K: eight lines of twelve words drawn from $T/words with
# seed K, so that each K is a campaign of its own.
campaign_text() {
	awk -v seed="$1" 'NR == FNR { w[n++] = $1; next } END {
		srand(seed * 7919 + 17)
		for (l = 0; l < 8; l++) { line = ""; for (j = 0; j < 12; j++) line = line w[int(rand() * n)] " "; print line }
	}' "$T/words" /dev/null
}

# fleet_own_line NODE: from a /v1/fleet/status answer on standard input
# (every node, sorted by name), NODE's own status as "STATE_HASH LAG
# OUTBOX READY".
fleet_own_line() {
	jq -r --arg n "$1" '(if type == "array" then . elif has("nodes") then .nodes else [.] end)
		| map(select(.node == $n)) | .[0] // {}
		| [.state_hash // "", (.lag // 1), (.outbox // 1), ((.ready and .connected) // false)] | @tsv' 2>/dev/null
}

# converged SECONDS: nodes 0, 1 and 2 are connected and ready, with one
# state hash (printed), no lag and an empty outbox; the sourcing script
# defines fleet_line I (node I's fleet_own_line, asked of node I).
converged() {
	local h0 h lag out rdy i ok
	for _ in $(seq $(($1 * 2))); do
		ok=1 h0=
		for i in 0 1 2; do
			read -r h lag out rdy <<<"$(fleet_line $i)"
			if [ -z "$h" ] || [ "${lag:-1}" != 0 ] || [ "${out:-1}" != 0 ] || [ "${rdy:-}" != true ]; then ok=; break; fi
			[ -z "$h0" ] && h0=$h
			[ "$h" = "$h0" ] || { ok=; break; }
		done
		[ -n "$ok" ] && { echo "$h0"; return 0; }
		sleep 0.5
	done
	return 1
}

# apt_install PACKAGE...: installs Debian's packages (root), retrying once
# after apt-get update; dies naming them when it cannot. Postfix, when
# among them, is preseeded as a local-only mailer (no questions).
apt_install() {
	[ $# = 0 ] && return 0
	[ "$(id -u)" = 0 ] || die "missing: install the Debian packages $* (or run as root)"
	echo "== installing $* (Debian packages)"
	case " $* " in *" postfix "*)
		printf '%s\n' "postfix postfix/main_mailer_type select Local only" \
			"postfix postfix/mailname string test.local" | debconf-set-selections ;;
	esac
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >/tmp/ndd-e2e-apt.log 2>&1; then
		apt-get update >/dev/null 2>&1
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >/tmp/ndd-e2e-apt.log 2>&1 ||
			{ tail -20 /tmp/ndd-e2e-apt.log; die "cannot install $*"; }
	fi
}

# install_commands CMD[=PACKAGE]...: installs from Debian's packages those
# of the commands that are missing (PACKAGE defaults to CMD), with
# apt_install.
install_commands() {
	local need=() c
	for c in "$@"; do
		command -v "${c%%=*}" >/dev/null || need+=("${c#*=}")
	done
	apt_install "${need[@]}"
}

# --- a private Postfix instance on loopback, as test/e2e/postfix.sh sets up
# its own (used by test/e2e/fleet.sh) ----------------------------------------

# install_postfix: Postfix, smtp-sink and swaks from Debian's packages when
# missing (root).
install_postfix() {
	command -v postfix >/dev/null && command -v smtp-sink >/dev/null && command -v swaks >/dev/null && return 0
	apt_install postfix swaks
}

# postfix_instance DIR SMTP_PORT SINK_PORT MILTER: writes a Postfix
# configuration in DIR/etc (queue DIR/queue, log DIR/postfix.log) listening
# on 127.0.0.1:SMTP_PORT, relaying to smtp-sink on SINK_PORT, with the
# milter MILTER (inet:127.0.0.1:PORT) and milter_default_action = accept.
postfix_instance() {
	local d=$1
	mkdir -p "$d/etc" "$d/queue" "$d/data"
	chown postfix "$d/data"
	cp /etc/postfix/master.cf "$d/etc/master.cf"
	cat >"$d/etc/main.cf" <<PFEOF
compatibility_level = 3.6
queue_directory = $d/queue
data_directory = $d/data
myhostname = e2e.test.local
mydomain = test.local
inet_interfaces = loopback-only
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
mydestination =
relayhost = [127.0.0.1]:$3
smtp_dns_support_level = disabled
alias_maps =
alias_database =
smtpd_relay_restrictions = permit_mynetworks, reject
maillog_file = $d/postfix.log
maillog_file_prefixes = $d
smtpd_milters = $4
non_smtpd_milters = \$smtpd_milters
milter_default_action = accept
milter_protocol = 6
milter_connect_timeout = 5s
milter_command_timeout = 5s
milter_content_timeout = 10s
milter_mail_macros = i {mail_addr} {mail_host} {mail_mailer}
milter_end_of_data_macros = i
PFEOF
	postconf -c "$d/etc" -F '*/*/chroot = n'
	postconf -c "$d/etc" -M smtp/inet="127.0.0.1:$2 inet n - n - - smtpd"
	postfix -c "$d/etc" check >"$d/check.log" 2>&1 || { cat "$d/check.log"; die "postfix check failed"; }
}

# postfix_start DIR SMTP_PORT: runs the instance in the foreground (in the
# background of the script); postfix_stop DIR ends it (SIGTERM to master).
postfix_start() {
	postfix -c "$1/etc" start-fg >>"$1/postfix-fg.log" 2>&1 &
	wait_port "$2" 15 || die "postfix ($1) did not start"
}
postfix_stop() {
	local pid
	pid=$(tr -d ' ' <"$1/queue/pid/master.pid" 2>/dev/null)
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null
	for _ in $(seq 50); do
		[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
}
