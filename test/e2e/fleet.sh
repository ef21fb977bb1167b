#!/usr/bin/env bash
# Fault test of a fleet: three Debian nats-server processes (one cluster,
# JetStream, nkey authentication) and three `nddmilter serve` daemons with
# fleet.nats.urls, all on loopback ports (docs/FLEET.md). Proves:
#   a) the NATS cluster forms with JetStream; a client without credentials
#      is refused, so it cannot publish events;
#   b) during a bounded stream of reports spread over the three nodes, the
#      stream's leader (a nats-server) and one daemon are killed with
#      SIGKILL, then restarted: afterwards every acknowledged report is
#      present on every node (its message matches the same campaign on
#      each) and `nddmilter fleet status` shows equal state hashes;
#   c) with all NATS servers down the milters keep answering (checked
#      through each milter port), reports are taken and spooled, and they
#      arrive on every node once NATS is back;
#   d) a report taken on node A makes node B reject a copy of the campaign
#      sent through a Postfix attached to B;
#   e) a node retired for good (its daemon stopped) turns silent in the
#      others' `fleet status`, a live node cannot be forgotten, and
#      `nddmilter fleet forget` removes the retired one;
#   f) a host added with its own nkey is refused until the servers'
#      configurations admit it (regenerated, nats-server reloaded with
#      SIGHUP), then starts from an empty store and reaches the fleet's
#      state hash, with every report on it.
# Installs nats-server (and postfix, swaks) from Debian's packages when
# missing (root). Every loop is bounded in count and time; the script
# cleans up on exit and prints "N passed, N failed".
# Environment: NDD_E2E_TIMEOUT (seconds, default 420), NDD_E2E_REPORTS
# (reports in b, default 60), NDD_E2E_STREAM_SECONDS (b's time bound,
# default 120: the stream stops there, after its kills), NDD_E2E_KEEP (a folder to keep the logs in),
# NDD_BIN (a built nddmilter instead of building one).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export PATH=$PATH:/usr/local/go/bin:/usr/sbin:/sbin
TIME_LIMIT=${NDD_E2E_TIMEOUT:-420}
REPORTS=${NDD_E2E_REPORTS:-60}
STREAM_SECONDS=${NDD_E2E_STREAM_SECONDS:-120}
STREAM=NDDMILTER

# pass, fail, die, free_port, wait_port, stop_pid, the watchdog, summary_exit, and
# the Postfix instance helpers.
. "$ROOT/test/e2e/lib.sh"

# --- prerequisites -----------------------------------------------------------
skip_unless_root "the fleet end-to-end test needs root (packages, Postfix's own user and queue)"
install_commands nats-server curl jq
install_postfix
for c in nats-server postfix postconf smtp-sink swaks curl jq go; do
	command -v $c >/dev/null || die "missing command: $c"
done

# --- workspace, cleanup and time bound ---------------------------------------
T=$(mktemp -d /tmp/ndd-e2e-fleet.XXXXXX)
chmod 755 "$T"
NATS_PID=("" "" "")
NDD_PID=("" "" "")
SINK_PID=

cleanup() {
	local rc=$? i
	stop_watchdog
	for i in 0 1 2 3; do
		stop_pid "${NDD_PID[$i]:-}"
		stop_pid "${NATS_PID[$i]:-}"
	done
	postfix_stop "$T/pf"
	stop_pid "$SINK_PID"
	if [ "$failed" -gt 0 ] || [ "$rc" -ne 0 ]; then
		for i in 0 1 2; do
			echo "--- nddmilter node $i log (tail)"; tail -15 "$T/ndd$i.log" 2>/dev/null
			echo "--- nats-server $i log (tail)"; tail -8 "$T/nats$i.log" 2>/dev/null
		done
		echo "--- postfix log (tail)"; tail -10 "$T/pf/postfix.log" 2>/dev/null
	fi
	keep_logs '*.log' '*.conf' '*.yaml'
	rm -rf "$T"
	summary_exit "$rc"
}
trap cleanup EXIT
start_watchdog

# --- build nddmilter (or take NDD_BIN) ---------------------------------------
build_nddmilter
build_nddlab

# --- ports and identities ----------------------------------------------------
for i in 0 1 2; do
	free_port; NATS_PORT[$i]=$PORT
	free_port; ROUTE_PORT[$i]=$PORT
	free_port; MON_PORT[$i]=$PORT
	free_port; MILTER_PORT[$i]=$PORT
	free_port; HTTP_PORT[$i]=$PORT
done
free_port; SMTP_PORT=$PORT
free_port; SINK_PORT=$PORT
TOKEN=e2e-token-$RANDOM$RANDOM$RANDOM$RANDOM$RANDOM$RANDOM
# Each node its own key (it authenticates the node and signs its events);
# node3's, the host added in (f), is made now so that every node's
# fleet.nodes lists it from the start (the list is read at start only),
# but the servers admit it only in (f). node0 stores the snapshots.
declare -A NODE_PUB
FLEET_NODES=
for i in 0 1 2 3; do
	NODE_PUB[$i]=$("$NDD" fleet nkey --seed "$T/node$i.nk") || die "nddmilter fleet nkey failed"
	snap=false; [ "$i" = 0 ] && snap=true
	FLEET_NODES="$FLEET_NODES    - {name: node$i, key: ${NODE_PUB[$i]}, snapshots: $snap}
"
done
READ_PUB=$("$NDD" fleet nkey --seed "$T/reader.nk") || die "nddmilter fleet nkey failed"
NATS_URLS=
for i in 0 1 2; do NATS_URLS="$NATS_URLS${NATS_URLS:+, }nats://127.0.0.1:${NATS_PORT[$i]}"; done

# --- (a) three nats-server processes -----------------------------------------
ROUTES=()
for i in 0 1 2; do ROUTES+=(--route "nats-route://127.0.0.1:${ROUTE_PORT[$i]}"); done
NODE_KEYS=(--node "node0=${NODE_PUB[0]},snapshots" --node "node1=${NODE_PUB[1]}" --node "node2=${NODE_PUB[2]}")
nats_conf() { # i: server i's configuration, admitting the keys of NODE_KEYS
	"$NDD" fleet nats-conf --name "nats$1" --listen "127.0.0.1:${NATS_PORT[$1]}" \
		--cluster-listen "127.0.0.1:${ROUTE_PORT[$1]}" "${ROUTES[@]}" --dir "$T/js$1" \
		--max-store-bytes $((256 << 20)) "${NODE_KEYS[@]}" --read-nkey "$READ_PUB" \
		--monitor "127.0.0.1:${MON_PORT[$1]}" >"$T/nats$1.conf" || die "nddmilter fleet nats-conf failed"
	chmod 600 "$T/nats$1.conf"
}
for i in 0 1 2; do nats_conf $i; done
nats-server -t -c "$T/nats0.conf" >"$T/nats-check.log" 2>&1 || { cat "$T/nats-check.log"; die "nats-server rejects the configuration of nddmilter fleet nats-conf"; }
start_nats() { # i
	nats-server -c "$T/nats$1.conf" >>"$T/nats$1.log" 2>&1 &
	NATS_PID[$1]=$!
}
for i in 0 1 2; do start_nats $i; done
for i in 0 1 2; do wait_port "${NATS_PORT[$i]}" 15 || die "nats-server $i did not start"; done

# meta_leader: the JetStream meta leader's name as server $1 sees it.
meta_leader() { curl -sf --max-time 2 "http://127.0.0.1:${MON_PORT[$1]}/jsz" | jq -r '.meta_cluster.leader // empty' 2>/dev/null; }
# stream_leader: the index of the nats-server leading the stream ("" when none).
stream_leader() {
	local i name
	for i in 0 1 2; do
		name=$(curl -sf --max-time 2 "http://127.0.0.1:${MON_PORT[$i]}/jsz?accounts=true&streams=true" 2>/dev/null |
			jq -r --arg s "$STREAM" '[.account_details[]?.stream_detail[]? | select(.name == $s) | .cluster.leader // empty][0] // empty' 2>/dev/null)
		[ -n "$name" ] && { echo "${name#nats}"; return 0; }
	done
	return 1
}
leader=
for _ in $(seq 150); do
	leader=$(meta_leader 0)
	[ -n "$leader" ] && break
	sleep 0.2
done
if [ -n "$leader" ]; then
	pass "(a) 3 nats-server processes (Debian $(nats-server --version | awk '{print $2}')) form a JetStream cluster: meta leader $leader"
else
	die "(a) no JetStream meta leader after 30 s"
fi

# nats_anonymous PORT: the server's answer to a client without credentials
# that tries to publish an event (the NATS text protocol over /dev/tcp;
# bounded by read timeouts; SIGPIPE ignored, the server may close first).
nats_anonymous() {
	local line reply=
	trap '' PIPE
	exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
	read -r -t 3 line <&3 # INFO
	printf 'CONNECT {"verbose":false,"pedantic":false}\r\nPUB %s.events 1\r\nx\r\nPING\r\n' "$STREAM" >&3 2>/dev/null
	while read -r -t 3 line <&3; do
		reply="$reply${line%$'\r'} "
		case $line in -ERR* | PONG*) break ;; esac
	done
	exec 3<&- 3>&-
	echo "$reply"
}
for _ in 1 2 3; do
	reply=$(nats_anonymous "${NATS_PORT[0]}")
	[ -n "$reply" ] && break
	sleep 0.5
done
case $reply in
*"Authorization Violation"*) pass "(a) a client without credentials is refused: $reply" ;;
*) fail "(a) a client without credentials was not refused: '$reply'" ;;
esac

# --- the three nddmilter daemons ---------------------------------------------
write_config() { # i: node i's configuration, its own key
	cat >"$T/ndd$1.yaml" <<EOF
milter:
  listen: inet:127.0.0.1:${MILTER_PORT[$1]}
http:
  listen: 127.0.0.1:${HTTP_PORT[$1]}
  token: $TOKEN
store:
  dir: $T/store$1
log:
  format: json
  level: info
fleet:
  enabled: true
  node: node$1
  nats:
    urls: [$NATS_URLS]
    nkey_seed: $T/node$1.nk
  nodes:
$FLEET_NODES  stream: $STREAM
  replicas: 3
  hits_every: 1s
EOF
}
for i in 0 1 2; do write_config $i; done
if ! "$NDD" config check "$T/ndd0.yaml" >"$T/config-check.log" 2>&1; then
	if grep -q 'fleet' "$T/config-check.log"; then
		echo "SKIP: this nddmilter has no fleet section yet: $(head -1 "$T/config-check.log")"
		exit 0
	fi
	cat "$T/config-check.log"
	die "nddmilter config check failed"
fi

start_node() { # i
	"$NDD" serve --config "$T/ndd$1.yaml" >>"$T/ndd$1.log" 2>&1 &
	NDD_PID[$1]=$!
}
wait_ready() { # i seconds
	for _ in $(seq $(($2 * 10))); do
		curl -sf --max-time 2 "http://127.0.0.1:${HTTP_PORT[$1]}/readyz" >/dev/null 2>&1 && return 0
		kill -0 "${NDD_PID[$1]}" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
for i in 0 1 2; do start_node $i; done
for i in 0 1 2; do wait_ready $i 30 || die "nddmilter node $i did not become ready"; done
pass "3 nddmilter daemons with fleet.nats.urls are ready (/readyz)"

api() { # i method path [curl args...]: the body on stdout, the HTTP code in $T/code
	local i=$1 m=$2 p=$3
	shift 3
	curl -s --max-time 10 -o - -w '\n%{http_code}' -X "$m" -H "Authorization: Bearer $TOKEN" \
		"$@" "http://127.0.0.1:${HTTP_PORT[$i]}$p" 2>/dev/null >"$T/api.out"
	tail -1 "$T/api.out" >"$T/code"
	sed '$d' "$T/api.out"
}

# Campaign texts: each report k is its own campaign, words drawn from the
# embedded lexicon with seed k (so that copies differ from other campaigns).
lexicon_words
report_msg() { # k reporter -> a report file
	printf 'From: Offers %s <offers%s@campaign.example>\nTo: %s@example.org\nSubject: Campaign %s %s\n\n%s\n' \
		"$1" "$1" "$2" "$1" "$(campaign_text "$1" | head -1 | cut -d' ' -f1-3)" "$(campaign_text "$1")" >"$T/report-$1.eml"
	echo "$T/report-$1.eml"
}
report() { # i k reporter: report campaign k on node i; 0 if acknowledged (HTTP 200)
	local f
	f=$(report_msg "$2" "$3")
	api "$1" POST "/v1/reports?kind=spam&reporter=$3" --data-binary @"$f" >"$T/report-$2.json"
	[ "$(cat "$T/code")" = 200 ]
}
campaign_on() { # i k: the campaign the message of report k matches on node i (0: none)
	api "$1" POST /v1/check --data-binary @"$T/report-$2.eml" | jq -r '.campaign // 0' 2>/dev/null
}
# fleet_line i: node i's own status (fresh, with a fresh state hash), as
# its /v1/fleet/status lists it (converged, in lib.sh, reads it).
fleet_line() { api "$1" GET /v1/fleet/status | fleet_own_line "node$1"; }

# --- (b) a stream of reports; kill -9 the stream leader and one daemon --------
ACKED=()
KILL_NATS_AT=$((REPORTS / 3))
KILL_NODE_AT=$((2 * REPORTS / 3))
killed_nats= killed_node=2
t0=$(date +%s)
for k in $(seq 1 "$REPORTS"); do
	# Bounded in time as in count: on a loaded machine the stream stops
	# early (after both kills, which the checks below need).
	if [ $(($(date +%s) - t0)) -ge "$STREAM_SECONDS" ]; then
		if [ "$k" -le "$KILL_NODE_AT" ]; then
			fail "(b) the report stream reached ${STREAM_SECONDS}s before both kills (at report $k)"
		else
			echo "   report $k: the stream's ${STREAM_SECONDS}s are up, stopping it"
		fi
		break
	fi
	i=$((k % 3))
	if [ "$k" = "$KILL_NATS_AT" ]; then
		killed_nats=$(stream_leader)
		if [ -n "$killed_nats" ]; then
			stop_pid "${NATS_PID[$killed_nats]}" KILL
			NATS_PID[$killed_nats]=
			echo "   report $k: killed -9 nats-server $killed_nats (the stream's leader)"
		else
			fail "(b) no stream leader found to kill at report $k"
		fi
	fi
	if [ "$k" = "$KILL_NODE_AT" ]; then
		stop_pid "${NDD_PID[$killed_node]}" KILL
		NDD_PID[$killed_node]=
		echo "   report $k: killed -9 nddmilter node $killed_node"
	fi
	if [ -z "${NDD_PID[$i]}" ]; then
		i=$(((i + 1) % 3))
	fi
	report $i "$k" "user$k" && ACKED+=("$k")
done
echo "   ${#ACKED[@]} of $REPORTS reports acknowledged"
[ "${#ACKED[@]}" -ge $((KILL_NODE_AT / 2)) ] || fail "(b) only ${#ACKED[@]} of $REPORTS reports acknowledged"
[ -n "$killed_nats" ] && { start_nats "$killed_nats"; wait_port "${NATS_PORT[$killed_nats]}" 15 || fail "(b) nats-server $killed_nats did not restart"; }
start_node $killed_node
wait_ready $killed_node 30 || fail "(b) nddmilter node $killed_node did not come back"
if hash=$(converged 60); then
	pass "(b) after kill -9 of the stream leader and a daemon, all nodes converge: state hash $hash (${SECONDS}s into the script)"
else
	fail "(b) the nodes did not converge in 60 s: $(for i in 0 1 2; do echo -n "node$i [$(fleet_line $i)] "; done)"
fi
# The administrator's view: `nddmilter fleet status` through node 0's API
# lists the three nodes with that hash (each node publishes its status
# every few seconds: bounded wait).
if [ -n "${hash:-}" ]; then
	seen=
	for _ in $(seq 40); do
		"$NDD" fleet status --api "http://127.0.0.1:${HTTP_PORT[0]}" --token "$TOKEN" --json >"$T/fleet-status.json" 2>&1
		seen=$(jq -r --arg h "$hash" '[.. | objects | select(has("state_hash")) | select(.state_hash == $h) | .node] | unique | join(",")' "$T/fleet-status.json" 2>/dev/null)
		[ "$seen" = "node0,node1,node2" ] && break
		sleep 0.5
	done
	if [ "$seen" = "node0,node1,node2" ]; then
		pass "(b) nddmilter fleet status lists node0, node1 and node2 with the same state hash"
	else
		fail "(b) nddmilter fleet status: nodes with hash $hash: '$seen': $(head -c 400 "$T/fleet-status.json")"
	fi
	# Each status names the node's build and the event versions it
	# applies (report events go out in the newest once all apply it).
	builds=$(jq -r '[.. | objects | select(has("state_hash")) | "\(.node)=\(.version // "")/\(.events // 0)"] | unique | join(" ")' "$T/fleet-status.json" 2>/dev/null)
	if [ "$(echo "$builds" | grep -oE 'node[0-2]=[^ /]+/4' | wc -l)" = 3 ]; then
		pass "(b) every node names its build and applies event version 4: $builds"
	else
		fail "(b) builds and event versions in fleet status: '$builds'"
	fi
	# The three hosts sign and apply alike, their clocks agree (within a
	# second) and each name is one process's.
	agree=$(jq -r '[.. | objects | select(has("state_hash"))] as $n |
		"\($n | map(.settings | tostring) | unique | length) \($n | map(select((.settings["signatures.lexicon"] // "") | length > 0)) | length) \($n | map(select(.name_clash)) | length) \($n | map(.clock_offset // 0 | fabs) | max)"' "$T/fleet-status.json" 2>/dev/null)
	read -r nset nlex nclash maxoff <<<"$agree"
	if [ "$nset" = 1 ] && [ "$nlex" = 3 ] && [ "$nclash" = 0 ] && [ "${maxoff%.*}" -lt 1000000000 ] 2>/dev/null; then
		pass "(b) the 3 nodes publish the same settings, no name clash, clock offsets under 1s (largest ${maxoff%.*} ns)"
	else
		fail "(b) settings, name clashes and clocks in fleet status: '$agree'"
	fi
	"$NDD" fleet status --api "http://127.0.0.1:${HTTP_PORT[0]}" --token "$TOKEN" >"$T/fleet-status.txt" 2>&1
	if grep -qE 'settings differ|clocks off|node name .*another process|DIVERGED' "$T/fleet-status.txt"; then
		fail "(b) fleet status warns of a healthy fleet: $(cat "$T/fleet-status.txt")"
	else
		pass "(b) fleet status warns of nothing on a healthy fleet (no divergence after the kill -9s)"
	fi
	diverged=""
	for i in 0 1 2; do
		diverged+="$(curl -s --max-time 5 "http://127.0.0.1:${HTTP_PORT[$i]}/metrics" | grep -E '^nddmilter_fleet_diverged' | awk '{print $2}')"
	done
	if [ "$diverged" = "000" ]; then
		pass "(b) nddmilter_fleet_diverged is 0 on the 3 nodes"
	else
		fail "(b) nddmilter_fleet_diverged on the 3 nodes: '$diverged'"
	fi
fi
missing=0
for k in "${ACKED[@]}"; do
	c0=$(campaign_on 0 "$k")
	for i in 1 2; do
		c=$(campaign_on $i "$k")
		if [ -z "$c0" ] || [ "$c0" = 0 ] || [ "$c" != "$c0" ]; then
			missing=$((missing + 1))
			[ "$missing" -le 3 ] && echo "   report $k: campaign '$c0' on node0, '$c' on node$i"
		fi
	done
done
if [ "$missing" = 0 ]; then
	pass "(b) every one of the ${#ACKED[@]} acknowledged reports is on every node (same campaign id on each)"
else
	fail "(b) $missing (report, node) pairs lack an acknowledged report"
fi

# --- (c) all NATS servers down: checks answer, reports spool, then arrive ------
for i in 0 1 2; do stop_pid "${NATS_PID[$i]}" KILL; NATS_PID[$i]=; done
ok=1
for i in 0 1 2; do
	if ! "$LAB" bench flood --addr "inet:127.0.0.1:${MILTER_PORT[$i]}" --sessions 0 --checks 20 \
		--concurrency 2 --timeout 30s >"$T/flood$i.log" 2>&1 || grep -q 'failed=[1-9]' "$T/flood$i.log"; then
		ok=
		fail "(c) NATS down: node $i's milter: $(tail -3 "$T/flood$i.log" | tr '\n' ' ')"
	fi
done
[ -n "$ok" ] && pass "(c) NATS down: all 3 milters answer checks through their milter ports: $(grep -o 'n=[0-9]* failed=0 p50=[^ ]*' "$T/flood0.log" | head -1) (node 0)"
SPOOLED=()
for k in $(seq $((REPORTS + 1)) $((REPORTS + 6))); do
	i=$((k % 3))
	if report $i "$k" "user$k"; then
		SPOOLED+=("$k")
	else
		fail "(c) NATS down: report $k on node $i refused: HTTP $(cat "$T/code") $(cat "$T/report-$k.json")"
	fi
done
if grep -qi 'queued\|spool' "$T/report-$((REPORTS + 1)).json" "$T/report-$((REPORTS + 2)).json"; then
	pass "(c) NATS down: ${#SPOOLED[@]} reports taken, the answer says queued: $(jq -c . "$T/report-$((REPORTS + 1)).json" | head -c 200)"
else
	fail "(c) NATS down: the report answer does not say queued: $(jq -c . "$T/report-$((REPORTS + 1)).json" 2>/dev/null | head -c 200)"
fi
for i in 0 1 2; do start_nats $i; done
for i in 0 1 2; do wait_port "${NATS_PORT[$i]}" 15 || fail "(c) nats-server $i did not restart"; done
if hash=$(converged 60); then
	pass "(c) NATS back: the spools drained and all nodes converge: state hash $hash (${SECONDS}s)"
else
	fail "(c) NATS back: no convergence in 60 s: $(for i in 0 1 2; do echo -n "node$i [$(fleet_line $i)] "; done)"
fi
missing=0
for k in "${SPOOLED[@]}"; do
	for i in 0 1 2; do
		c=$(campaign_on $i "$k")
		[ -n "$c" ] && [ "$c" != 0 ] || missing=$((missing + 1))
	done
done
if [ "$missing" = 0 ]; then
	pass "(c) every spooled report arrived on every node"
else
	fail "(c) $missing (spooled report, node) pairs missing"
fi

# --- (d) Postfix: a report on node A, a copy through B's Postfix is rejected ---
mkdir -p "$T/sink"
chown postfix "$T/sink"
smtp-sink -u postfix -d "$T/sink/%M." -c 127.0.0.1:$SINK_PORT 100 >"$T/sink.log" 2>&1 &
SINK_PID=$!
wait_port $SINK_PORT 5 || die "smtp-sink did not start"
postfix_instance "$T/pf" $SMTP_PORT $SINK_PORT "inet:127.0.0.1:${MILTER_PORT[1]}"
postfix_start "$T/pf" $SMTP_PORT
# Five reporters on node A (0): the default policy rejects well-reported
# campaigns.
K=$((REPORTS + 100))
for u in alice bob carol dave erin; do
	report 0 $K "$u" || fail "(d) report by $u on node 0: HTTP $(cat "$T/code")"
done
converged 30 >/dev/null || fail "(d) no convergence after the reports on node 0"
swaks --server 127.0.0.1:$SMTP_PORT --from sender@example.net --to user@example.org \
	--header "Subject: Campaign $K" --header "X-E2E-Test: fleet-copy" \
	--body "$(campaign_text $K)
Reference $RANDOM." --timeout 30 >"$T/swaks-copy.log" 2>&1
if grep -q '<\*\* *550 5.7.1 ' "$T/swaks-copy.log"; then
	pass "(d) reported on node A, a copy through node B's Postfix is rejected: $(grep -o '550 5.7.1 .*' "$T/swaks-copy.log" | head -1)"
else
	fail "(d) the copy through node B's Postfix was not rejected:"
	grep -E '^(<~?\*\*|<- *[0-9])' "$T/swaks-copy.log" | tail -4
fi

# --- (e) a node retired: silent, then forgotten ----------------------------------
fleet_cli() { # subcommand args...: through node 0's API
	local sub=$1
	shift
	"$NDD" fleet "$sub" "$@" --api "http://127.0.0.1:${HTTP_PORT[0]}" --token "$TOKEN"
}
stop_pid "${NDD_PID[2]}" TERM
NDD_PID[2]=
silent=
for _ in $(seq 90); do # a status is silent after 32 s by default
	fleet_cli status --json >"$T/status-e.json" 2>&1
	silent=$(jq -r '[.[] | select(.silent) | .node] | join(",")' "$T/status-e.json" 2>/dev/null)
	[ "$silent" = node2 ] && break
	sleep 1
done
if [ "$silent" = node2 ]; then
	pass "(e) node2 stopped for good: silent in node0's fleet status ($(fleet_cli status 2>&1 | grep -c silent) lines say so, ${SECONDS}s)"
else
	fail "(e) node2 not shown silent in 90 s: $(head -c 300 "$T/status-e.json")"
fi
if fleet_cli forget node1 >"$T/forget1.log" 2>&1; then
	fail "(e) fleet forget of a live node succeeded"
elif grep -q '409' "$T/forget1.log"; then
	pass "(e) a live node cannot be forgotten: $(head -1 "$T/forget1.log")"
else
	fail "(e) fleet forget node1: $(head -1 "$T/forget1.log")"
fi
if fleet_cli forget node2 >"$T/forget2.log" 2>&1 &&
	[ "$(fleet_cli status --json 2>/dev/null | jq -r '[.[].node] | join(",")')" = node0,node1 ]; then
	pass "(e) nddmilter fleet forget node2: $(head -1 "$T/forget2.log"); fleet status lists node0 and node1"
else
	fail "(e) fleet forget node2: $(head -1 "$T/forget2.log"); status: $(fleet_cli status 2>&1 | head -5)"
fi

# --- (f) a host added: its own key, the servers reloaded, an empty store -------
free_port; MILTER_PORT[3]=$PORT
free_port; HTTP_PORT[3]=$PORT
write_config 3
if "$NDD" fleet check --connect "$T/ndd3.yaml" >"$T/check3-before.log" 2>&1; then
	fail "(f) a key the servers do not list connects: $(tail -2 "$T/check3-before.log")"
else
	pass "(f) node3's new key is refused before the servers admit it: $(grep -i -m1 'author\|refus\|denied\|violation' "$T/check3-before.log" | head -c 160)"
fi
NODE_KEYS+=(--node "node3=${NODE_PUB[3]}")
for i in 0 1 2; do
	nats_conf $i
	kill -HUP "${NATS_PID[$i]}" 2>/dev/null || fail "(f) nats-server $i is not running"
done
admitted=
for _ in $(seq 30); do
	"$NDD" fleet check --connect "$T/ndd3.yaml" >"$T/check3.log" 2>&1 && { admitted=1; break; }
	sleep 0.5
done
if [ -n "$admitted" ]; then
	pass "(f) servers reloaded (SIGHUP) with node3's key: fleet check --connect passes"
else
	fail "(f) node3 not admitted after the reload: $(tail -3 "$T/check3.log")"
fi
# Before it starts, its settings are compared with the live nodes': the
# same pass, another revocation rule is refused, naming it.
if grep -q "^settings: the same as the [0-9]* live nodes'" "$T/check3.log"; then
	pass "(f) fleet check --connect: $(grep -m1 '^settings:' "$T/check3.log")"
else
	fail "(f) fleet check --connect did not compare node3's settings: $(tail -3 "$T/check3.log")"
fi
cp "$T/ndd3.yaml" "$T/ndd3-odd.yaml"
printf 'policy:\n  revoke_ham_reporters: 3\n' >>"$T/ndd3-odd.yaml"
if "$NDD" fleet check --connect "$T/ndd3-odd.yaml" >"$T/check3-odd.log" 2>&1; then
	fail "(f) a configuration with another revocation rule passes fleet check --connect"
elif grep -q "policy.revoke: .*ham_reporters=3 ratio=0.5 (this configuration)" "$T/check3-odd.log"; then
	pass "(f) fleet check --connect refuses another revocation rule: $(grep -m1 'policy.revoke' "$T/check3-odd.log" | sed 's/^ *//')"
else
	fail "(f) fleet check --connect on another revocation rule: $(tail -3 "$T/check3-odd.log")"
fi
start_node 3
wait_ready 3 60 || fail "(f) node3 did not become ready"
joined=
for _ in $(seq 120); do
	read -r h0 _ _ _ <<<"$(fleet_line 0)"
	read -r h3 lag3 _ ready3 <<<"$(fleet_line 3)"
	if [ -n "$h3" ] && [ "$h3" = "$h0" ] && [ "${lag3:-1}" = 0 ] && [ "${ready3:-}" = true ]; then joined=1; break; fi
	sleep 0.5
done
if [ -n "$joined" ]; then
	pass "(f) node3 started from an empty store and reached node0's state hash $h3 (${SECONDS}s)"
else
	fail "(f) node3 did not reach node0's state: node0 [$(fleet_line 0)] node3 [$(fleet_line 3)]"
fi
missing=0
for k in $(seq 1 "$REPORTS") "${SPOOLED[@]}"; do
	c0=$(campaign_on 0 "$k")
	[ -f "$T/report-$k.eml" ] && [ "$c0" != 0 ] || continue
	[ "$(campaign_on 3 "$k")" = "$c0" ] || missing=$((missing + 1))
done
if [ "$missing" = 0 ]; then
	pass "(f) every report node0 has matches the same campaign on node3"
else
	fail "(f) $missing reports differ between node0 and node3"
fi
exit 0
