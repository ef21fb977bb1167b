package main

import (
	"strings"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/fleet"
)

func TestPrintFleetStatus(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.Local)
	node := func(name, hash string, seq uint64, silent bool, at time.Time) fleet.Status {
		return fleet.Status{Node: name, Connected: true, Ready: true, Applied: seq, StateHash: hash,
			StateHashSeq: seq, Silent: silent, Time: at}
	}
	tests := []struct {
		name  string
		nodes []fleet.Status
		want  []string
		not   []string
	}{
		{"converged", []fleet.Status{node("mx1", "aaaa", 9, false, now), node("mx2", "aaaa", 9, false, now)},
			[]string{"2 nodes, one state hash: converged", "12:00:00"}, []string{"silent"}},
		{"a silent node's old hash is left out",
			[]fleet.Status{node("mx1", "aaaa", 9, false, now), node("mx2", "aaaa", 9, false, now),
				node("mx3", "bbbb", 4, true, now.Add(-72*time.Hour))},
			[]string{"2 nodes, one state hash: converged", "1 silent", "fleet forget", "2026-11-25 12:00", "mx3   silent"}, nil},
		{"diverged, two nodes", []fleet.Status{node("mx1", "aaaa", 9, false, now), node("mx2", "cccc", 9, false, now)},
			[]string{"DIVERGED: nodes that applied the same events hold different campaign states, after event 9: mx1 / mx2 hold different states.", "rebuild it from the fleet"}, []string{"converged"}},
		{"diverged, the odd one out", []fleet.Status{node("mx1", "aaaa", 9, false, now), node("mx2", "aaaa", 9, false, now),
			node("mx3", "cccc", 9, false, now), node("mx4", "dddd", 11, false, now)},
			[]string{"DIVERGED: ", "after event 9: mx3 differs from mx1, mx2."}, []string{"not comparable", "mx4 differs"}},
		{"diverged, a node yet to hash after the event", []fleet.Status{node("mx1", "aaaa", 9, false, now), node("mx2", "aaaa", 9, false, now),
			node("mx3", "cccc", 9, false, now), node("mx4", "dddd", 7, false, now)},
			[]string{"DIVERGED: ", "after event 9: mx1, mx2 / mx3 hold different states (1 more node to hash after it: the odd one out is not known yet)."}, []string{"mx3 differs"}},
		{"a silent node's hash is not compared", []fleet.Status{node("mx1", "aaaa", 9, false, now), node("mx2", "aaaa", 9, false, now),
			node("mx3", "cccc", 9, true, now)},
			[]string{"2 nodes, one state hash: converged"}, []string{"DIVERGED"}},
		{"two builds, one applying older events",
			[]fleet.Status{
				{Node: "mx1", Connected: true, Ready: true, Version: "1.4.0", Events: 3, Time: now},
				{Node: "mx2", Connected: true, Ready: true, Version: "1.3.2", Events: 2, Error: "newer version", Time: now},
				{Node: "mx3", Connected: true, Ready: true, Events: 3, Time: now},
				{Node: "mx4", Silent: true, Version: "1.2.0", Events: 1, Time: now.Add(-time.Hour)}},
			[]string{"2 builds running: 1.3.2 (mx2), 1.4.0 (mx1)", "upgrade mx2: a newer build publishes events of version 3",
				"1.4.0  ", "mx3   connected  0        0    0                   12:00:00  -"}, []string{"mx4:", "upgrade mx2, mx4"}},
		{"one build", []fleet.Status{
			{Node: "mx1", Version: "1.4.0", Events: 2, Time: now}, {Node: "mx2", Version: "1.4.0", Events: 2, Time: now}},
			nil, []string{"builds running", "upgrade"}},
		{"clocks off", []fleet.Status{
			{Node: "mx1", Time: now, ClockOffset: 3 * time.Millisecond},
			{Node: "mx2", Time: now, ClockOffset: 2*time.Hour + 400*time.Millisecond},
			{Node: "mx3", Time: now, ClockOffset: -90 * time.Second},
			{Node: "mx4", Silent: true, Time: now, ClockOffset: time.Hour}},
			[]string{"clocks off from the median of the nodes' clocks: mx2 2h0m0s ahead, mx3 1m30s behind; ", "fix its time (NTP)"}, []string{"mx1 0s", "mx4 1h"}},
		{"settings differ", []fleet.Status{
			{Node: "mx1", Time: now, Settings: map[string]string{"signatures.lexicon": "aa", "store.expiry": "720h0m0s"}},
			{Node: "mx2", Time: now, Settings: map[string]string{"signatures.lexicon": "bb", "store.expiry": "720h0m0s"}}},
			[]string{"settings differ between nodes", "  signatures.lexicon: aa (mx1), bb (mx2)\n"}, []string{"store.expiry"}},
		{"name clash", []fleet.Status{{Node: "mx1", Time: now, NameClash: true}, {Node: "mx2", Time: now}},
			[]string{"node name mx1: another process publishes its status under it too"}, []string{"node name mx2"}},
		{"a node cut off from the stream", []fleet.Status{{Node: "mx1", Connected: true, Ready: true, Time: now},
			{Node: "mx2", Connected: true, Ready: true, StreamUnreachable: true, Outbox: 3, Time: now}},
			[]string{"mx2   no stream  "}, []string{"mx1   no stream"}},
		{"clocks agree", []fleet.Status{{Node: "mx1", Time: now, ClockOffset: 20 * time.Millisecond}, {Node: "mx2", Time: now}},
			nil, []string{"clocks off"}},
		{"different sequences", []fleet.Status{node("mx1", "aaaa", 9, false, now), node("mx2", "cccc", 8, false, now)},
			[]string{"not comparable yet"}, nil},
		{"replicas all current", []fleet.Status{withReplicas(node("mx1", "aaaa", 9, false, now), lead("mx1"), cur("mx2"), cur("mx3"))},
			[]string{"stream: 3 replicas, leader mx1, all current"}, []string{"remove-server"}},
		{"one replica offline of three: no spare",
			[]fleet.Status{
				withReplicas(node("mx1", "aaaa", 9, false, now.Add(-time.Second)), lead("mx1"), cur("mx2"), cur("mx3")),
				withReplicas(node("mx2", "aaaa", 9, false, now), lead("mx1"), cur("mx2"), off("mx3"))},
			[]string{"mx3 offline (last heard 5m0s ago)", "one more server down and the stream stops taking events", "fleet remove-server mx3"},
			[]string{"all current"}},
		{"one of five offline, one behind",
			[]fleet.Status{withReplicas(node("mx1", "aaaa", 9, false, now), lead("mx1"), cur("mx2"), off("mx3"),
				fleet.Replica{Server: "mx4", Lag: 12}, cur("mx5"))},
			[]string{"mx3 offline (last heard", "mx4 behind by 12 events", "the stream can lose 1 more server(s)"}, nil},
		{"offline, never heard by this leader",
			[]fleet.Status{withReplicas(node("mx1", "aaaa", 9, false, now), lead("mx1"), cur("mx2"), fleet.Replica{Server: "mx3", Offline: true})},
			[]string{"leader mx1; mx3 offline: one more server down"}, []string{"last heard"}},
		{"a silent node's replicas are not read",
			[]fleet.Status{withReplicas(node("mx1", "aaaa", 9, true, now), lead("mx1"), off("mx2"), off("mx3"))},
			nil, []string{"stream:"}},
		{"a status not read is named, and the fleet not called converged",
			[]fleet.Status{node("mx1", "aaaa", 9, false, now), node("mx2", "aaaa", 9, false, now), {Node: "mx3", Unread: "context deadline exceeded"}},
			[]string{"mx3   UNREAD", "status not read: mx3 (context deadline exceeded)", "not compared: the status of mx3 could not be read"},
			[]string{"converged"}},
		{"the other nodes not listed", []fleet.Status{{Node: "mx1", Time: now, PeersUnread: "timeout"}},
			[]string{"mx1 could not list the other nodes' statuses (timeout)"}, nil},
		{"a node silent for 70 s: no margin claimed",
			[]fleet.Status{withReplicas(node("mx1", "aaaa", 9, false, now), lead("mx1"), cur("mx2"), off("mx3"), cur("mx4"), cur("mx5")),
				node("mx2", "aaaa", 9, true, now.Add(-70*time.Second))},
			[]string{"mx3 offline", "mx2 silent or unread: their servers may be down too, how many more servers the stream can lose is not known"},
			[]string{"can lose 1 more"}},
		{"all current, but a node silent",
			[]fleet.Status{withReplicas(node("mx1", "aaaa", 9, false, now), lead("mx1"), cur("mx2"), cur("mx3")),
				node("mx3", "aaaa", 9, true, now.Add(-70*time.Second))},
			[]string{"all current as last seen; mx3 silent or unread"}, []string{"all current\n"}},
		{"halted", []fleet.Status{node("mx1", "aaaa", 9, false, now), {Node: "mx2", Connected: true, Ready: true, Applied: 9, StateHash: "aaaa", StateHashSeq: 9, Time: now, Halted: &fleet.Halt{Seq: 10, Version: 9}}},
			[]string{"mx2   HALTED", "HALTED: mx2 (halted: event 10 of version 9 needs an upgrade"}, []string{"converged"}},
		{"a single replica", []fleet.Status{withReplicas(node("mx1", "aaaa", 9, false, now), lead("mx1"))},
			[]string{"stream: 1 replica, leader mx1 (no other copy: fleet.replicas is 1)"}, nil},
	}
	for _, tt := range tests {
		var b strings.Builder
		if err := printFleetStatusAt(&b, tt.nodes, now); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%s", tt.name, w, out)
			}
		}
		for _, w := range tt.not {
			if strings.Contains(out, w) {
				t.Errorf("%s: output has %q:\n%s", tt.name, w, out)
			}
		}
	}
}

func withReplicas(s fleet.Status, r ...fleet.Replica) fleet.Status {
	s.Replicas = r
	return s
}

func lead(name string) fleet.Replica { return fleet.Replica{Server: name, Leader: true, Current: true} }
func cur(name string) fleet.Replica  { return fleet.Replica{Server: name, Current: true} }
func off(name string) fleet.Replica {
	return fleet.Replica{Server: name, Offline: true, Seen: 5 * time.Minute}
}
