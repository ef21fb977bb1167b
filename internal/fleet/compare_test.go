package fleet

import (
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
		{"the odd one out", []Status{st("mx1", "a", 5, false), st("mx3", "b", 5, false), st("mx2", "a", 5, false), st("mx4", "c", 4, false)},
			false, []string{"after event 5: mx3 differs from mx1, mx2"}, [][]string{{"mx3"}}, ""},
		{"a tie of four", []Status{st("mx1", "a", 5, false), st("mx2", "a", 5, false), st("mx3", "b", 5, false), st("mx4", "b", 5, false)},
			false, []string{"after event 5: mx1, mx2 / mx3, mx4 hold different states"}, [][]string{nil}, ""},
		{"two divergences", []Status{st("mx1", "a", 5, false), st("mx2", "b", 5, false), st("mx3", "c", 7, false), st("mx4", "d", 7, false), st("mx5", "d", 7, false)},
			false, []string{"after event 5: mx1 / mx2 hold different states", "after event 7: mx3 differs from mx4, mx5"}, [][]string{nil, {"mx3"}}, ""},
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
