#!/usr/bin/env bash
# The monitoring files against Debian's Prometheus. Proves:
#   a) contrib/prometheus/nddmilter-alerts.yml passes `promtool check rules`
#      and its unit tests (`promtool test rules`, the expected alerts and
#      their texts);
#   b) a running daemon's /metrics (standalone metrics and a fleet node's)
#      passes `promtool check metrics` (the exposition format and naming);
#   c) a real Prometheus server scraping that daemon loads every rule
#      (health ok) and, with the fleet's nats-server killed, fires
#      NddmilterFleetDisconnected and, once a report is queued,
#      NddmilterFleetOutboxStuck; both resolve when NATS is back. The
#      rules' "for" durations are shortened to seconds for this run only.
# Installs prometheus (with promtool) and nats-server from Debian's
# packages when missing (root). Every loop is bounded in count and time;
# the script cleans up on exit and prints "N passed, N failed".
# Environment: NDD_E2E_TIMEOUT (seconds, default 240), NDD_E2E_KEEP (a
# folder to keep the logs in), NDD_BIN (a built nddmilter instead of
# building one).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export PATH=$PATH:/usr/local/go/bin:/usr/sbin:/sbin
TIME_LIMIT=${NDD_E2E_TIMEOUT:-240}
RULES=$ROOT/contrib/prometheus/nddmilter-alerts.yml

# pass, fail, die, free_port, wait_port, stop_pid, the watchdog, summary_exit.
. "$ROOT/test/e2e/lib.sh"

# --- prerequisites -----------------------------------------------------------
need=()
command -v promtool >/dev/null && command -v prometheus >/dev/null || need+=(prometheus)
command -v nats-server >/dev/null || need+=(nats-server)
if [ ${#need[@]} -gt 0 ] && [ "$(id -u)" != 0 ]; then
	echo "SKIP: ${need[*]} missing and not root to install them"
	echo "0 passed, 0 failed"
	exit 0
fi
apt_install "${need[@]}"
install_commands curl jq
for c in promtool prometheus nats-server curl jq go; do
	command -v $c >/dev/null || die "missing command: $c"
done

# --- workspace, cleanup and time bound ---------------------------------------
T=$(mktemp -d /tmp/ndd-e2e-prom.XXXXXX)
NATS_PID= NDD_PID= PROM_PID=
cleanup() {
	local rc=$?
	stop_watchdog
	stop_pid "$PROM_PID"
	stop_pid "$NDD_PID"
	stop_pid "$NATS_PID"
	if [ "$failed" -gt 0 ] || [ "$rc" -ne 0 ]; then
		echo "--- nddmilter log (tail)"; tail -15 "$T/ndd.log" 2>/dev/null
		echo "--- prometheus log (tail)"; tail -15 "$T/prom.log" 2>/dev/null
	fi
	keep_logs '*.log' '*.yml' '*.yaml'
	rm -rf "$T"
	summary_exit "$rc"
}
trap cleanup EXIT
start_watchdog

# --- (a) the rules and their unit tests ----------------------------------------
if promtool check rules "$RULES" >"$T/check-rules.log" 2>&1; then
	pass "(a) promtool check rules: $(grep -o '[0-9]* rules found' "$T/check-rules.log")"
else
	fail "(a) promtool check rules: $(tail -5 "$T/check-rules.log")"
fi
if (cd "$ROOT/contrib/prometheus" && promtool test rules nddmilter-alerts_test.yml) >"$T/test-rules.log" 2>&1; then
	pass "(a) promtool test rules: the alerts fire with their labels and texts as the unit tests expect"
else
	fail "(a) promtool test rules: $(tail -15 "$T/test-rules.log")"
fi

# --- build nddmilter (or take NDD_BIN) ---------------------------------------
build_nddmilter

# --- a fleet node on one Debian nats-server ------------------------------------
free_port; NATS_PORT=$PORT
free_port; MILTER_PORT=$PORT
free_port; HTTP_PORT=$PORT
free_port; PROM_PORT=$PORT
TOKEN=e2e-token-$RANDOM$RANDOM$RANDOM$RANDOM
NODE_PUB=$("$NDD" fleet nkey --seed "$T/node.nk") || die "nddmilter fleet nkey failed"
"$NDD" fleet nats-conf --name nats0 --listen "127.0.0.1:$NATS_PORT" --cluster-listen - --dir "$T/js" \
	--max-store-bytes $((64 << 20)) --node "mx1=$NODE_PUB,snapshots" >"$T/nats.conf" || die "nddmilter fleet nats-conf failed"
start_nats() {
	nats-server -c "$T/nats.conf" >>"$T/nats.log" 2>&1 &
	NATS_PID=$!
	wait_port "$NATS_PORT" 15 || die "nats-server did not start"
}
start_nats
cat >"$T/ndd.yaml" <<EOF
milter:
  listen: inet:127.0.0.1:$MILTER_PORT
http:
  listen: 127.0.0.1:$HTTP_PORT
  token: $TOKEN
store:
  dir: $T/store
fleet:
  enabled: true
  node: mx1
  replicas: 1
  nats:
    urls: [nats://127.0.0.1:$NATS_PORT]
    nkey_seed: $T/node.nk
  nodes:
    - {name: mx1, key: $NODE_PUB, snapshots: true}
EOF
"$NDD" serve --config "$T/ndd.yaml" >"$T/ndd.log" 2>&1 &
NDD_PID=$!
ready=
for _ in $(seq 300); do
	curl -sf --max-time 2 "http://127.0.0.1:$HTTP_PORT/readyz" 2>/dev/null | grep -q 'fleet: connected' && { ready=1; break; }
	kill -0 "$NDD_PID" 2>/dev/null || break
	sleep 0.1
done
[ -n "$ready" ] || die "nddmilter did not become ready with its fleet connected"

# --- (b) the exposition passes promtool's lint -----------------------------------
curl -sf --max-time 5 "http://127.0.0.1:$HTTP_PORT/metrics" >"$T/metrics.txt" || die "GET /metrics failed"
if promtool check metrics <"$T/metrics.txt" >"$T/check-metrics.log" 2>&1; then
	pass "(b) promtool check metrics: $(grep -c '^# TYPE' "$T/metrics.txt") metric families, fleet ones included ($(grep -c '^# TYPE nddmilter_fleet_' "$T/metrics.txt")), no problem"
else
	fail "(b) promtool check metrics: $(head -10 "$T/check-metrics.log")"
fi

# --- (c) a Prometheus server scrapes the daemon and evaluates the rules ---------
sed -E 's/^( +for: )[0-9]+m$/\13s/' "$RULES" >"$T/rules.yml"
cat >"$T/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [$T/rules.yml]
scrape_configs:
  - job_name: nddmilter
    static_configs:
      - targets: ['127.0.0.1:$HTTP_PORT']
EOF
prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" \
	--web.listen-address="127.0.0.1:$PROM_PORT" >"$T/prom.log" 2>&1 &
PROM_PID=$!
wait_port "$PROM_PORT" 30 || die "prometheus did not start"
prom() { # PromQL -> the result's JSON array
	curl -s --max-time 5 "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1" | jq -c '.data.result' 2>/dev/null
}
firing() { # alertname -> "1" when firing
	prom "ALERTS{alertname=\"$1\",alertstate=\"firing\"}" | jq -r 'if length > 0 then "1" else "" end'
}
wait_for() { # seconds command...: until the command prints something
	local n=$1
	shift
	for _ in $(seq $((n * 2))); do
		[ -n "$("$@")" ] && return 0
		sleep 0.5
	done
	return 1
}
up() { prom 'up{job="nddmilter"} == 1' | jq -r 'if length > 0 then "1" else "" end'; }
if wait_for 30 up; then
	pass "(c) Prometheus scrapes the daemon (up == 1)"
else
	fail "(c) Prometheus does not scrape the daemon: $(prom 'up')"
fi
rules_ok() {
	curl -s --max-time 5 "http://127.0.0.1:$PROM_PORT/api/v1/rules" |
		jq -r '[.data.groups[].rules[] | select(.health == "ok")] | length' 2>/dev/null | grep -v '^0$'
}
want=$(grep -c '^ *- alert:' "$RULES")
if wait_for 20 rules_ok && [ "$(rules_ok)" = "$want" ]; then
	pass "(c) Prometheus evaluates all $want rules (health ok)"
else
	fail "(c) rules evaluated ok: $(rules_ok) of $want: $(curl -s "http://127.0.0.1:$PROM_PORT/api/v1/rules" | jq -c '[.data.groups[].rules[] | {name, health, lastError}]' | head -c 600)"
fi
if [ -n "$(prom 'ALERTS{alertstate="firing"}' | jq -r '.[].metric.alertname')" ]; then
	fail "(c) alerts fire on a healthy daemon: $(prom 'ALERTS')"
else
	pass "(c) no alert fires on a healthy daemon"
fi

stop_pid "$NATS_PID"
NATS_PID=
if wait_for 60 firing NddmilterFleetDisconnected; then
	pass "(c) nats-server killed: NddmilterFleetDisconnected fires ($(prom 'ALERTS{alertname="NddmilterFleetDisconnected"}' | jq -r '.[0].metric.node'))"
else
	fail "(c) NddmilterFleetDisconnected did not fire in 60 s: $(prom 'nddmilter_fleet_connected')"
fi
printf 'From: a@campaign.example\nTo: b@example.org\nSubject: Offer\n\n%s\n' \
	"$(for i in $(seq 30); do echo -n "word$i offer discount refinance mortgage "; done)" >"$T/report.eml"
code=$(curl -s -o "$T/report.json" -w '%{http_code}' --max-time 15 -X POST -H "Authorization: Bearer $TOKEN" \
	--data-binary @"$T/report.eml" "http://127.0.0.1:$HTTP_PORT/v1/reports?kind=spam&reporter=alice")
[ "$code" = 200 ] && grep -q queued "$T/report.json" || fail "(c) report with NATS down: HTTP $code $(cat "$T/report.json")"
if wait_for 60 firing NddmilterFleetOutboxStuck; then
	pass "(c) a report queued: NddmilterFleetOutboxStuck fires"
else
	fail "(c) NddmilterFleetOutboxStuck did not fire in 60 s: $(prom 'nddmilter_fleet_outbox_events')"
fi

start_nats
resolved() {
	[ -z "$(firing NddmilterFleetDisconnected)" ] && [ -z "$(firing NddmilterFleetOutboxStuck)" ] && echo 1
}
if wait_for 90 resolved; then
	pass "(c) nats-server back: both alerts resolve (the node reconnected and published its outbox)"
else
	fail "(c) the alerts did not resolve in 90 s: $(prom 'ALERTS{alertstate="firing"}')"
fi
exit 0
