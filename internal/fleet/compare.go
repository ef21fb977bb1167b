package fleet

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
)

// Comparing the nodes' states.
//
// Every node applies the same events with the same deterministic
// function, so two nodes whose state hashes were taken after the same
// whole event hold the same campaign state — or one of them went wrong: a
// store damaged on disk, a build with a bug, settings that differ (a
// revocation rule, a store expiry), a store written behind the fleet's
// back. Nothing else would tell: such a node keeps checking mail from its
// own state, and its answers differ from the others'. Each node compares
// its hash with the others' after the same event and names a divergence
// in its status line (/readyz), the log, `fleet status`, the dashboard
// and the metrics; with three nodes or more, the majority says which node
// is the odd one out.

// Comparison is what the state hashes of a fleet's live nodes say.
type Comparison struct {
	// Live is the number of nodes not Silent (silent nodes' hashes are
	// old, and left out).
	Live int
	// Hashed is the number of live nodes with a state hash, and Seqs the
	// distinct stream sequences those hashes were taken after.
	Hashed int
	Seqs   int
	// Converged: at least two live nodes, all hashed after the same
	// sequence, with one hash.
	Converged bool
	// Diverged lists the sequences after which live nodes' hashes
	// differ, with the nodes grouped by hash.
	Diverged []Divergence
	// Halted are the live nodes that stopped applying the stream at an
	// event of a newer version (Status.Halted), as "mx1 (halted: …)":
	// equal hashes then mean nothing, the fleet is not converged.
	Halted []string
	// Unread are the nodes whose status could not be read (Status.Unread):
	// not compared, and the fleet is not called converged.
	Unread []string
}

// Divergence is a stream sequence after which nodes hold different
// campaign states.
type Divergence struct {
	Seq uint64
	// Groups are the nodes by state hash: the largest group first, ties
	// by name; each group's names sorted.
	Groups [][]string
	// Pending is the number of other live nodes that may still hash
	// their state after Seq: those without a hash, or with one taken
	// after an earlier event (a node past Seq hashes only later ones).
	Pending int
}

// total is the number of live nodes the divergence may come to involve.
func (d Divergence) total() int {
	n := d.Pending
	for _, g := range d.Groups {
		n += len(g)
	}
	return n
}

// OddOut is the nodes outside the largest group when it is a strict
// majority of the nodes compared and of those pending (with two nodes, a
// tie, or while the pending nodes could still change the majority, it
// cannot be told which side is wrong: nil).
func (d Divergence) OddOut() []string {
	if len(d.Groups) < 2 || 2*len(d.Groups[0]) <= d.total() {
		return nil
	}
	var odd []string
	for _, g := range d.Groups[1:] {
		odd = append(odd, g...)
	}
	slices.Sort(odd)
	return odd
}

// Undecided reports whether the pending nodes' hashes could still make
// one side a majority: which node went wrong is not known yet (and no
// node warns of it yet), though the nodes compared do differ.
func (d Divergence) Undecided() bool {
	return len(d.Groups) >= 2 && d.OddOut() == nil && 2*(len(d.Groups[0])+d.Pending) > d.total()
}

// String describes the divergence, e.g. "after event 41: mx3 differs
// from mx1, mx2".
func (d Divergence) String() string {
	if odd := d.OddOut(); odd != nil {
		return fmt.Sprintf("after event %d: %s differs from %s", d.Seq, strings.Join(odd, ", "), strings.Join(d.Groups[0], ", "))
	}
	parts := make([]string, len(d.Groups))
	for i, g := range d.Groups {
		parts[i] = strings.Join(g, ", ")
	}
	if d.Undecided() {
		more := "1 more node"
		if d.Pending > 1 {
			more = fmt.Sprintf("%d more nodes", d.Pending)
		}
		return fmt.Sprintf("after event %d: %s hold different states (%s to hash after it: the odd one out is not known yet)",
			d.Seq, strings.Join(parts, " / "), more)
	}
	return fmt.Sprintf("after event %d: %s hold different states", d.Seq, strings.Join(parts, " / "))
}

// Compare compares the state hashes of the live nodes among nodes.
func Compare(nodes []Status) Comparison {
	var c Comparison
	bySeq := map[uint64]map[string][]string{} // seq → hash → nodes
	var at []uint64                           // each live node's hash sequence (0: none)
	for _, s := range nodes {
		if s.Unread != "" {
			c.Unread = append(c.Unread, s.Node)
			continue
		}
		if s.Silent {
			continue
		}
		c.Live++
		if s.Halted != nil {
			c.Halted = append(c.Halted, fmt.Sprintf("%s (%s)", s.Node, s.Halted))
		}
		if s.StateHash == "" {
			at = append(at, 0)
			continue
		}
		at = append(at, s.StateHashSeq)
		c.Hashed++
		if bySeq[s.StateHashSeq] == nil {
			bySeq[s.StateHashSeq] = map[string][]string{}
		}
		bySeq[s.StateHashSeq][s.StateHash] = append(bySeq[s.StateHashSeq][s.StateHash], s.Node)
	}
	c.Seqs = len(bySeq)
	for _, seq := range slices.Sorted(maps.Keys(bySeq)) {
		hashes := bySeq[seq]
		if len(hashes) < 2 {
			continue
		}
		d := Divergence{Seq: seq}
		for _, a := range at {
			if a < seq {
				d.Pending++
			}
		}
		for _, g := range hashes {
			slices.Sort(g)
			d.Groups = append(d.Groups, g)
		}
		slices.SortFunc(d.Groups, func(a, b []string) int {
			if len(a) != len(b) {
				return len(b) - len(a)
			}
			return strings.Compare(a[0], b[0])
		})
		c.Diverged = append(c.Diverged, d)
	}
	c.Converged = c.Live > 1 && c.Hashed == c.Live && c.Seqs == 1 && len(c.Diverged) == 0 && len(c.Halted) == 0 && len(c.Unread) == 0
	return c
}

// Summary is one line on the comparison for `fleet status`: converged,
// not comparable yet, or diverged; "" with fewer than two live nodes
// hashed.
func (c Comparison) Summary() string {
	line := c.summary()
	if len(c.Unread) > 0 {
		line = strings.TrimPrefix(line+"; ", "; ") + fmt.Sprintf("not compared: the status of %s could not be read", strings.Join(c.Unread, ", "))
	}
	return line
}

func (c Comparison) summary() string {
	switch {
	case len(c.Halted) > 0:
		return fmt.Sprintf("HALTED: %s: these nodes apply no events (reports are taken but protect no host through them) until upgraded to a build that applies that version; %s",
			strings.Join(c.Halted, ", "), haltRemedy)
	case len(c.Diverged) > 0:
		ds := make([]string, len(c.Diverged))
		for i, d := range c.Diverged {
			ds[i] = d.String()
		}
		return fmt.Sprintf("DIVERGED: nodes that applied the same events hold different campaign states, %s. %s",
			strings.Join(ds, "; "), divergenceRemedy)
	case c.Converged:
		return fmt.Sprintf("%d nodes, one state hash: converged", c.Live)
	case c.Hashed < 2:
		return ""
	case c.Seqs > 1:
		return fmt.Sprintf("%d nodes, state hashes after %d different events: not comparable yet (a node hashes its state when idle)", c.Live, c.Seqs)
	default:
		return fmt.Sprintf("%d nodes, %d with a state hash, all equal", c.Live, c.Hashed)
	}
}

// haltRemedy is what to do about nodes halted at an event of a newer
// version (docs/FLEET.md, failure modes).
const haltRemedy = "upgrade them; if no build publishes that version (a node's key misused), take the event out of the stream with an admin user (nats stream rmm STREAM SEQ) and replace that node's key in fleet.nodes"

// divergenceRemedy is what to do about a node that diverged.
const divergenceRemedy = "Look for differing settings and store errors in its log; then rebuild it from the fleet: stop it, move its store directory away, start it (it fills an empty store from the fleet's snapshot and events)"

// noteDivergence records what the live nodes' hashes say about this
// node (from a read of their statuses) and logs when that changes.
func (n *Node) noteDivergence(nodes []Status) {
	// This node warns when it is the odd one out, or when it cannot be
	// told which side is (two nodes, a tie); a node of the majority does
	// not: the fleet-wide views (`fleet status`, the dashboard) name the
	// divergence anyway. While nodes that have not hashed after the event
	// could still make a majority, nobody warns yet.
	var mine []Divergence
	for _, d := range Compare(nodes).Diverged {
		if d.Undecided() {
			continue // the pending nodes will tell
		}
		odd := d.OddOut()
		in := slices.Contains(odd, n.opts.Node)
		if odd == nil {
			in = slices.ContainsFunc(d.Groups, func(g []string) bool { return slices.Contains(g, n.opts.Node) })
		}
		if in {
			mine = append(mine, d)
		}
	}
	msg := ""
	if len(mine) > 0 {
		ds := make([]string, len(mine))
		for i, d := range mine {
			ds[i] = d.String()
		}
		msg = strings.Join(ds, "; ")
	}
	if old, _ := n.divergence.Swap(msg).(string); old == msg {
		return
	}
	if msg == "" {
		n.log.Info("fleet: this node's state hash agrees with the others' again")
		return
	}
	n.log.Error("fleet: nodes that applied the same events hold different campaign states", slog.String("diverged", msg),
		slog.String("remedy", divergenceRemedy))
}

// DivergenceWarning names the events after which this node's state hash
// differs from the other live nodes' (this node the odd one out, or no
// majority to tell), as last read; "" when none.
func (n *Node) DivergenceWarning() string {
	msg, _ := n.divergence.Load().(string)
	if msg == "" {
		return ""
	}
	return "campaign states differ between nodes " + msg + ": " + divergenceRemedy
}

// Diverged reports whether DivergenceWarning has something to say.
func (n *Node) Diverged() bool { return n.DivergenceWarning() != "" }
