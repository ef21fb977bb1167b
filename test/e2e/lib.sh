# Helpers shared by the end-to-end scripts (sourced, not run): counting
# results, free loopback ports, waiting on a port, and the watchdog that
# bounds a script's time. The sourcing script sets T (its workspace) and
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

# summary_exit RC: prints the counts and exits non-zero on any failure.
summary_exit() {
	echo "$passed passed, $failed failed"
	if [ "$failed" -gt 0 ] || [ "$1" -ne 0 ]; then
		exit 1
	fi
	exit 0
}
