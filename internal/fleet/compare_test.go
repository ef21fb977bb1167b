package fleet

import (
	"log/slog"
	"slices"
	"testing"
	"time"
)

func TestCompare(t *testing.T) {
	st := func(node, hash string, seq uint64, silent bool) Status {
		return Status{Node: node, StateHash: hash, StateHashSeq: seq, Silent: silent}
	}
	tests := []struct {
		name      string
		nodes     []Status
		converged bool
		diverged  []string // Divergence.String of each
		odd       [][]string
		summary   string
	}{
		{"one node", []Status{st("mx1", "a", 5, false)}, false, nil, nil, ""},
		{"converged", []Status{st("mx1", "a", 5, false), st("mx2", "a", 5, false), st("mx3", "a", 5, false)},
			true, nil, nil, "3 nodes, one state hash: converged"},
		{"different events", []Status{st("mx1", "a", 5, false), st("mx2", "b", 6, false)},
			false, nil, nil, "2 nodes, state hashes after 2 different events: not comparable yet (a node hashes its state when idle)"},
		{"one not hashed yet", []Status{st("mx1", "a", 5, false), st("mx2", "a", 5, false), st("mx3", "", 0, false)},
			false, nil, nil, "3 nodes, 2 with a state hash, all equal"},
		{"silent left out", []Status{st("mx1", "a", 5, false), st("mx2", "a", 5, false), st("mx3", "b", 5, true)},
			true, nil, nil, "2 nodes, one state hash: converged"},
		{"two nodes differ: no majority", []Status{st("mx2", "b", 5, false), st("mx1", "a", 5, false)},
			false, []string{"after event 5: mx1 / mx2 hold different states"}, [][]string{nil}, ""},
		{"the odd one out", []Status{st("mx1", "a", 5, false), st("mx3", "b", 5, false), st("mx2", "a", 5, false), st("mx4", "c", 6, false)},
			false, []string{"after event 5: mx3 differs from mx1, mx2"}, [][]string{{"mx3"}}, ""},
		{"a node yet to hash could make a tie", []Status{st("mx1", "a", 5, false), st("mx3", "b", 5, false), st("mx2", "a", 5, false), st("mx4", "c", 4, false)},
			false, []string{"after event 5: mx1, mx2 / mx3 hold different states (1 more node to hash after it: the odd one out is not known yet)"}, [][]string{nil}, ""},
		{"a node not hashed yet could make a majority", []Status{st("mx1", "a", 5, false), st("mx2", "b", 5, false), st("mx3", "", 0, false)},
			false, []string{"after event 5: mx1 / mx2 hold different states (1 more node to hash after it: the odd one out is not known yet)"}, [][]string{nil}, ""},
		{"a tie of four", []Status{st("mx1", "a", 5, false), st("mx2", "a", 5, false), st("mx3", "b", 5, false), st("mx4", "b", 5, false)},
			false, []string{"after event 5: mx1, mx2 / mx3, mx4 hold different states"}, [][]string{nil}, ""},
		{"two divergences", []Status{st("mx1", "a", 9, false), st("mx2", "b", 9, false), st("mx3", "c", 7, false), st("mx4", "d", 7, false), st("mx5", "d", 7, false)},
			false, []string{"after event 7: mx3 differs from mx4, mx5", "after event 9: mx1 / mx2 hold different states (3 more nodes to hash after it: the odd one out is not known yet)"}, [][]string{{"mx3"}, nil}, ""},
		{"nodes past the event do not count", []Status{st("mx1", "a", 5, false), st("mx2", "b", 5, false), st("mx3", "c", 8, false), st("mx4", "c", 8, false)},
			false, []string{"after event 5: mx1 / mx2 hold different states"}, [][]string{nil}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Compare(tt.nodes)
			if c.Converged != tt.converged {
				t.Errorf("Converged = %v, want %v", c.Converged, tt.converged)
			}
			var got []string
			for i, d := range c.Diverged {
				got = append(got, d.String())
				if i < len(tt.odd) && !slices.Equal(d.OddOut(), tt.odd[i]) {
					t.Errorf("OddOut = %v, want %v", d.OddOut(), tt.odd[i])
				}
			}
			if !slices.Equal(got, tt.diverged) {
				t.Errorf("Diverged = %q, want %q", got, tt.diverged)
			}
			sum := c.Summary()
			if tt.diverged != nil {
				if want := "DIVERGED: nodes that applied the same events hold different campaign states, " + tt.diverged[0]; len(sum) < len(want) || sum[:len(want)] != want {
					t.Errorf("Summary = %q, want it to start %q", sum, want)
				}
			} else if sum != tt.summary {
				t.Errorf("Summary = %q, want %q", sum, tt.summary)
			}
		})
	}
}

// TestNoteDivergence: which nodes warn of a divergence — the odd one out,
// every node of a tie, none while a node yet to hash after the event
// could still make a majority.
func TestNoteDivergence(t *testing.T) {
	st := func(node, hash string, seq uint64) Status {
		return Status{Node: node, StateHash: hash, StateHashSeq: seq}
	}
	tests := []struct {
		name  string
		nodes []Status
		warn  []string
	}{
		{"converged", []Status{st("mx1", "a", 5), st("mx2", "a", 5), st("mx3", "a", 5)}, nil},
		{"the odd one out", []Status{st("mx1", "a", 5), st("mx2", "a", 5), st("mx3", "b", 5)}, []string{"mx3"}},
		{"two nodes: a tie", []Status{st("mx1", "a", 5), st("mx2", "b", 5)}, []string{"mx1", "mx2"}},
		{"the third yet to hash after the event", []Status{st("mx1", "a", 5), st("mx2", "b", 5), st("mx3", "a", 4)}, nil},
		{"the third not hashed yet", []Status{st("mx1", "a", 5), st("mx2", "b", 5), st("mx3", "", 0)}, nil},
		{"the third past the event: a tie", []Status{st("mx1", "a", 5), st("mx2", "b", 5), st("mx3", "c", 6)}, []string{"mx1", "mx2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var warned []string
			for _, s := range tt.nodes {
				n := &Node{opts: Options{Node: s.Node}, log: slog.New(slog.DiscardHandler)}
				n.noteDivergence(tt.nodes)
				if n.Diverged() {
					warned = append(warned, s.Node)
				}
			}
			if !slices.Equal(warned, tt.warn) {
				t.Errorf("warned: %v, want %v", warned, tt.warn)
			}
		})
	}
}

// TestStreamCopies: the copies as the freshest live node sees them; a
// silent node's view, however recent its clock says it is, is not used.
func TestStreamCopies(t *testing.T) {
	now := time.Now()
	a := []Replica{{Server: "mx1", Leader: true}, {Server: "mx2", Current: true}}
	b := []Replica{{Server: "mx1", Leader: true}, {Server: "mx2", Offline: true}}
	old := []Replica{{Server: "old", Leader: true}}
	nodes := []Status{
		{Node: "mx1", Time: now.Add(-time.Second), Replicas: a},
		{Node: "mx2", Time: now, Replicas: b},
		{Node: "mx3", Time: now.Add(time.Hour), Replicas: old, Silent: true},
		{Node: "mx4", Time: now.Add(time.Minute)}, // no answer on its copies
	}
	if got := StreamCopies(nodes); !slices.Equal(got, b) {
		t.Errorf("StreamCopies = %+v, want mx2's %+v", got, b)
	}
	if got := StreamCopies(nodes[2:]); got != nil {
		t.Errorf("StreamCopies of a silent node and one without copies = %+v, want nil", got)
	}
}
