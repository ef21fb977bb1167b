#!/usr/bin/env bash
# Partition test of a fleet: three hosts, each a network namespace of its
# own holding one `nddmilter serve` with an embedded JetStream server
# (fleet.embedded: the daemons are the cluster, routes authenticated by a
# route password), joined by a bridge in a fourth namespace. One host is
# cut off by setting its link down — a partition, not a crash: every
# process keeps running. Proves:
#   a) the three embedded servers form the cluster across the namespaces
#      and a report taken on one host reaches every host;
#   b) while one host is cut off, its milter answers checks from its own
#      store (through its milter port) and recognizes the campaigns it
#      had; a report taken there is answered "queued" (at once once the
#      node knows the stream does not answer); the two
#      other hosts keep a quorum and take reports, replicated;
#   c) once the link is back, the cut-off host's queued reports reach the
#      others and theirs reach it: the three converge on one state hash,
#      and no node reports a divergence.
# Needs root (namespaces); installs curl, jq and iproute2 from Debian's
# packages when missing. The addresses (10.231.5.0/24) exist only inside the namespaces
# the script creates and removes. Every loop is bounded in count and time;
# the script prints "N passed, N failed".
# Environment: NDD_E2E_TIMEOUT (seconds, default 300), NDD_E2E_KEEP (a
# folder to keep the logs in), NDD_BIN (a built nddmilter instead of
# building one).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export PATH=$PATH:/usr/local/go/bin:/usr/sbin:/sbin
TIME_LIMIT=${NDD_E2E_TIMEOUT:-300}

# pass, fail, die, stop_pid, the watchdog, summary_exit, install_commands.
. "$ROOT/test/e2e/lib.sh"

skip_unless_root "the partition test needs root (network namespaces)"
install_commands curl jq ip=iproute2

T=$(mktemp -d /tmp/ndd-e2e-partition.XXXXXX)
chmod 755 "$T"
NS=nddp$$ # the namespaces: ${NS}0..2 the hosts, ${NS}br the bridge
NDD_PID=("" "" "")
TOKEN=partition-test-token-0123456789
NET=10.231.5

cleanup() {
	local rc=$? i
	stop_watchdog
	for i in 0 1 2; do stop_pid "${NDD_PID[$i]:-}"; done
	if [ "$failed" -gt 0 ] || [ "$rc" -ne 0 ]; then
		for i in 0 1 2; do
			echo "--- nddmilter host $i log (tail)"; tail -15 "$T/ndd$i.log" 2>/dev/null
		done
	fi
	for i in 0 1 2 br; do ip netns del "$NS$i" 2>/dev/null; done
	keep_logs '*.log' '*.yaml'
	rm -rf "$T"
	summary_exit "$rc"
}
trap cleanup EXIT
start_watchdog

build_nddmilter
build_nddlab

# --- the network: a bridge namespace and three hosts linked to it -------------
ip netns add "${NS}br" || die "ip netns add failed (no network namespaces here?)"
ip -n "${NS}br" link set lo up
ip -n "${NS}br" link add br0 type bridge && ip -n "${NS}br" link set br0 up || die "cannot make the bridge"
for i in 0 1 2; do
	ip netns add "$NS$i" || die "ip netns add $NS$i failed"
	ip -n "$NS$i" link set lo up
	ip link add eth0 netns "$NS$i" type veth peer name "b$i" netns "${NS}br" || die "cannot link host $i"
	ip -n "$NS$i" addr add "$NET.1$i/24" dev eth0
	ip -n "$NS$i" link set eth0 up
	ip -n "${NS}br" link set "b$i" master br0
	ip -n "${NS}br" link set "b$i" up
done
cut_off() { ip -n "${NS}br" link set "b$1" down; }
heal() { ip -n "${NS}br" link set "b$1" up; }

# --- the three daemons: each listens on its own loopback (milter, API, NATS
# clients) and routes to the others on the bridge -------------------------------
head -c 24 /dev/urandom | base64 >"$T/route.pw"
chmod 600 "$T/route.pw"
# Each node its key (its NATS user, the signer of its events); mx0 stores
# the snapshots.
FLEET_NODES=
for i in 0 1 2; do
	pub=$("$NDD" fleet nkey --seed "$T/mx$i.nk") || die "nddmilter fleet nkey failed"
	snap=false; [ "$i" = 0 ] && snap=true
	FLEET_NODES="$FLEET_NODES    - {name: mx$i, key: $pub, snapshots: $snap}
"
done
for i in 0 1 2; do
	cat >"$T/ndd$i.yaml" <<EOF
milter:
  listen: inet:127.0.0.1:8899
http:
  listen: 127.0.0.1:8898
  token: $TOKEN
store:
  dir: $T/store$i
fleet:
  enabled: true
  node: mx$i
  nats:
    nkey_seed: $T/mx$i.nk
  nodes:
$FLEET_NODES  embedded:
    enabled: true
    listen: 127.0.0.1:4222
    cluster_listen: $NET.1$i:6222
    cluster_user: route
    cluster_password_file: $T/route.pw
    dir: $T/nats$i
    routes: [nats-route://$NET.10:6222, nats-route://$NET.11:6222, nats-route://$NET.12:6222]
  replicas: 3
  hits_every: 1s
EOF
	ip netns exec "$NS$i" "$NDD" serve --config "$T/ndd$i.yaml" >"$T/ndd$i.log" 2>&1 &
	NDD_PID[$i]=$!
done

api() { # i method path [curl args...]: the body on stdout, the HTTP code in $T/code, the time in $T/time
	local i=$1 m=$2 p=$3
	shift 3
	ip netns exec "$NS$i" curl -s --max-time 20 -o - -w '\n%{http_code} %{time_total}' -X "$m" \
		-H "Authorization: Bearer $TOKEN" "$@" "http://127.0.0.1:8898$p" 2>/dev/null >"$T/api.out"
	tail -1 "$T/api.out" | cut -d' ' -f1 >"$T/code"
	tail -1 "$T/api.out" | cut -d' ' -f2 >"$T/time"
	sed '$d' "$T/api.out"
}
ready() { # i seconds: /readyz answers 200 and the node is in the fleet (the answer in $T/readyz$i)
	for _ in $(seq $(($2 * 5))); do
		api "$1" GET /readyz >"$T/readyz$1"
		grep -q 'fleet: connected' "$T/readyz$1" && [ "$(cat "$T/code")" = 200 ] && return 0
		sleep 0.2
	done
	return 1
}
lexicon_words
message() { # k: campaign k's message (its own words, drawn with seed k)
	local body
	body=$(campaign_text "$1")
	printf 'From: Offers %s <offers%s@campaign.example>\nTo: user@example.org\nSubject: Campaign %s %s\n\n%s\n' \
		"$1" "$1" "$1" "$(echo "$body" | head -1 | cut -d' ' -f1-3)" "$body" >"$T/msg-$1.eml"
}
report() { # i k: reports campaign k on host i; prints the answer's replication
	message "$2"
	api "$1" POST "/v1/reports?kind=spam&reporter=user$2" --data-binary @"$T/msg-$2.eml" >"$T/report-$2.json"
	jq -r '.replication // ""' "$T/report-$2.json" 2>/dev/null
}
campaign_on() { # i k: the campaign campaign k's message matches on host i (0: none)
	api "$1" POST /v1/check --data-binary @"$T/msg-$2.eml" | jq -r '.campaign // 0' 2>/dev/null
}
fleet_line() { api "$1" GET /v1/fleet/status | fleet_own_line "mx$1"; } # host i's own status (converged, in lib.sh, reads it)
agree() { # k: campaign k's message matches one and the same campaign on the three hosts
	local c0 c
	c0=$(campaign_on 0 "$1")
	[ -n "$c0" ] && [ "$c0" != 0 ] || return 1
	for i in 1 2; do
		c=$(campaign_on $i "$1")
		[ "$c" = "$c0" ] || return 1
	done
}

# --- (a) the cluster forms across the namespaces -------------------------------
for i in 0 1 2; do ready $i 60 || die "host $i not in the fleet within 60 s: /readyz $(cat "$T/code"): $(head -c 300 "$T/readyz$i")"; done
pass "(a) 3 daemons with embedded servers in 3 network namespaces are in the fleet (/readyz)"
rep=
for _ in $(seq 60); do # the stream is created once the servers elected a meta leader
	rep=$(report 0 1)
	[ "$rep" = replicated ] && break
	sleep 1
done
[ "$rep" = replicated ] || die "(a) report 1 on host 0: '$rep' $(cat "$T/report-1.json")"
if converged 60 >/dev/null && agree 1; then
	pass "(a) a report taken on host 0 reaches the 3 hosts across the bridge"
else
	fail "(a) report 1 not on the 3 hosts: $(for i in 0 1 2; do echo -n "host$i [$(fleet_line $i)] "; done)"
fi

# --- (b) host 2 cut off ----------------------------------------------------------
cut_off 2
echo "   host 2's link is down (${SECONDS}s)"
# Its milter answers from its own store, at once, and knows campaign 1.
if ip netns exec "${NS}2" "$LAB" bench flood --addr inet:127.0.0.1:8899 --sessions 0 --checks 20 --concurrency 2 \
	--timeout 30s >"$T/flood2.log" 2>&1 && ! grep -q 'failed=[1-9]' "$T/flood2.log"; then
	pass "(b) cut off: host 2's milter answers checks through its milter port: $(grep -o 'n=[0-9]* failed=0 p50=[^ ]*' "$T/flood2.log" | head -1)"
else
	fail "(b) cut off: host 2's milter: $(tail -3 "$T/flood2.log" | tr '\n' ' ')"
fi
c=$(campaign_on 2 1)
t=$(cat "$T/time")
if [ -n "$c" ] && [ "$c" != 0 ] && awk -v t="$t" 'BEGIN { exit !(t < 1) }'; then
	pass "(b) cut off: host 2 still recognizes campaign 1 (check answered in ${t}s)"
else
	fail "(b) cut off: host 2's check of campaign 1: campaign '$c' in ${t}s"
fi
queued() { # k what [max seconds]: report k on host 2 is answered "queued" (within max seconds)
	local rep t
	rep=$(report 2 "$1")
	t=$(cat "$T/time")
	if [ "$(cat "$T/code")" = 200 ] && [ "$rep" = queued ] && { [ -z "${3:-}" ] || awk -v t="$t" -v m="$3" 'BEGIN { exit !(t < m) }'; }; then
		pass "(b) cut off: $2 (answered \"queued\" in ${t}s)"
	else
		fail "(b) cut off: report $1 on host 2: HTTP $(cat "$T/code") '$rep' in ${t}s: $(head -c 300 "$T/report-$1.json")"
	fi
}
# A report there is answered, queued.
queued 3 "a report on host 2 is queued"
# /readyz stays 200 and, once the node's queries of the stream found no
# leader (at the latest its next status, 10 s), says so.
said=
for _ in $(seq 30); do
	api 2 GET /readyz >"$T/readyz2"
	[ "$(cat "$T/code")" = 200 ] || break
	grep -q 'fleet: stream unreachable' "$T/readyz2" && { said=1; break; }
	sleep 0.5
done
if [ -n "$said" ]; then
	pass "(b) cut off: host 2 stays ready for mail, and says why reports queue (/readyz in $(cat "$T/time")s): $(grep -m1 'fleet' "$T/readyz2" | head -c 200)"
else
	fail "(b) cut off: host 2's /readyz: HTTP $(cat "$T/code") $(tr '\n' ' ' <"$T/readyz2" | head -c 300)"
fi
# Now that the node knows, the next report is queued without a publish
# that would wait for its timeout (2 s).
queued 4 "the next report on host 2 is queued without a publish" 1
m=$(api 2 GET /metrics | grep -E '^nddmilter_fleet_(connected|stream_reachable)\{' | awk '{print $2}' | tr '\n' ' ')
if [ "$m" = "1 0 " ]; then
	pass "(b) cut off: host 2's metrics: nddmilter_fleet_connected 1, nddmilter_fleet_stream_reachable 0"
else
	fail "(b) cut off: host 2's nddmilter_fleet_connected and _stream_reachable: '$m'"
fi
# The other two keep a quorum (electing a new stream leader if it was on
# host 2) and take reports, replicated.
rep=
for _ in $(seq 30); do
	rep=$(report 0 2)
	[ "$rep" = replicated ] && break
	sleep 1
done
# Replicated: host 1 applies it within moments, or, when its stream
# consumer was served by host 2, once it is recreated on a server still
# in the quorum: by the client after two missed heartbeats (1 s each),
# else by the node after two stall checks (5 s each).
c=0
since=$SECONDS
for _ in $(seq 120); do
	c=$(campaign_on 1 2)
	[ -n "$c" ] && [ "$c" != 0 ] && break
	sleep 0.25
done
if [ "$rep" = replicated ] && [ -n "$c" ] && [ "$c" != 0 ]; then
	pass "(b) cut off: hosts 0 and 1 keep a quorum: a report on host 0 is replicated and host 1 has it ($((SECONDS - since))s)"
else
	fail "(b) cut off: report on host 0: '$rep', host 1 matches campaign '$c' after $((SECONDS - since))s; host 1: $(fleet_line 1)"
fi
c=$(campaign_on 2 2)
if [ "$c" = 0 ]; then
	pass "(b) cut off: host 2 does not have that report yet"
else
	fail "(b) cut off: host 2 matched report 2 ('$c') while cut off"
fi

# --- (c) the link back: everything reaches everyone ------------------------------
heal 2
echo "   host 2's link is up again (${SECONDS}s)"
if hash=$(converged 120); then
	pass "(c) link back: host 2's queue drained and the 3 hosts converge: state hash ${hash:0:16} (${SECONDS}s into the script)"
else
	fail "(c) link back: no convergence in 120 s: $(for i in 0 1 2; do echo -n "host$i [$(fleet_line $i)] "; done)"
fi
if ready 2 10; then
	pass "(c) link back: host 2's /readyz: $(grep -m1 'fleet' "$T/readyz2" | head -c 120)"
else
	fail "(c) link back: host 2's /readyz: $(head -c 300 "$T/readyz2")"
fi
for k in 2 3 4; do
	if agree $k; then
		pass "(c) link back: report $k matches the same campaign on the 3 hosts"
	else
		fail "(c) link back: report $k: $(for i in 0 1 2; do echo -n "host$i=$(campaign_on $i $k) "; done)"
	fi
done
# The statuses (published every 10 s, each with the hash its node took
# once idle) come to say so: bounded wait; a divergence fails at once.
said=
for _ in $(seq 40); do
	ip netns exec "${NS}0" "$NDD" fleet status --api http://127.0.0.1:8898 --token "$TOKEN" >"$T/status.txt" 2>&1
	grep -q 'DIVERGED' "$T/status.txt" && break
	grep -q 'one state hash: converged' "$T/status.txt" && { said=1; break; }
	sleep 1
done
if [ -n "$said" ]; then
	pass "(c) fleet status: $(grep -m1 'converged' "$T/status.txt")"
else
	fail "(c) fleet status: $(tr '\n' '|' <"$T/status.txt")"
fi
