package fleet

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Clocks.
//
// Events carry the time of the node that publishes them (Options.Clock):
// a report's time becomes its campaign's first and last seen on every
// node, and an expiry decision's cutoff deletes, on every node, the
// campaigns last seen before it. One host whose clock runs days ahead
// would thus expire the whole fleet's campaigns. A node therefore
// measures how far its clock is from the others', and while it is off by
// more than Options.MaxClockOffset it publishes no expiry decision and
// dates its other events and the hits it counts by the others' clocks
// (its own minus the offset).
//
// The measure needs no clock to be right: each status carries the time of
// its node's clock (Status.Time) and NATS stores it with the time of the
// bucket's leader server, so Time minus that stored time is the node's
// skew from the same server clock (plus a publish's latency), and the
// difference between two nodes' skews is the difference of their clocks.
// A node's offset is its skew minus the median skew of the live nodes:
// with three or more nodes the one that is off is the one named, whatever
// the server's clock; with two, each is off by half their difference
// (both stop deciding expiry, which is the safe side). A change of the
// bucket's leader between two statuses adds the difference of the two
// servers' clocks, which NTP keeps far below the bound.
//
// A status is dated just before its put, and a put can wait (for a new
// stream leader, a retry): a late status reads as a clock behind by the
// wait, never as one ahead. Each node's skew is therefore the largest of
// its last skewSamples statuses' (the least delayed, as NTP keeps the
// sample of least delay): late statuses do not move it, a clock set
// ahead (the side that expires campaigns early) is seen at its first
// status, and one set back once its earlier statuses left the window.

// skewSamples is how many of a node's last statuses its skew is the
// largest of.
const skewSamples = 3

// skewWindows holds each node's last skews, by status key.
type skewWindows struct {
	mu sync.Mutex
	m  map[string]*skewWindow
}

// skewWindow is one node's last skews and the revisions of their
// statuses, in a ring: a status's revision identifies it, whatever order
// concurrent readers see statuses in (a bucket made again restarts its
// revisions, which are then new ones too).
type skewWindow struct {
	revs  [skewSamples]uint64
	skews [skewSamples]time.Duration
	n     int // samples held
	next  int // the slot the next sample takes
}

// add records the skew of key's status of revision rev (once per
// revision) and returns the largest of key's last skewSamples skews.
func (w *skewWindows) add(key string, rev uint64, skew time.Duration) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = make(map[string]*skewWindow)
	}
	sw := w.m[key]
	if sw == nil {
		sw = &skewWindow{}
		w.m[key] = sw
	}
	if !slices.Contains(sw.revs[:sw.n], rev) {
		sw.revs[sw.next], sw.skews[sw.next] = rev, skew
		sw.next = (sw.next + 1) % skewSamples
		sw.n = min(sw.n+1, skewSamples)
	}
	return slices.Max(sw.skews[:sw.n])
}

// keep forgets the windows of the keys not in keys (nodes forgotten or
// expired), so that the map holds only the nodes read last.
func (w *skewWindows) keep(keys []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k := range w.m {
		if !slices.Contains(keys, k) {
			delete(w.m, k)
		}
	}
}

// ErrClockOffset is returned by Expire while this node's clock is
// further from the fleet's median clock than Options.MaxClockOffset, or
// before it was measured.
var ErrClockOffset = errors.New("fleet: this host's clock is off from the fleet's")

// setClockOffsets sets the ClockOffset of each status (out[0] this
// node's) from the skews of their clocks from the bucket's server
// (skews[i] of out[i]): the skew minus the median skew of the nodes not
// silent.
func setClockOffsets(out []Status, skews []time.Duration) {
	var live []time.Duration
	for i, s := range out {
		if i == 0 || !s.Silent {
			live = append(live, skews[i])
		}
	}
	slices.Sort(live)
	median := live[len(live)/2]
	if len(live)%2 == 0 {
		median = (live[len(live)/2-1] + live[len(live)/2]) / 2
	}
	for i := range out {
		out[i].ClockOffset = skews[i] - median
	}
}

// eventTime is the time of an event published now: Options.Clock, less
// this node's offset from the others' clocks when it is beyond
// Options.MaxClockOffset.
func (n *Node) eventTime() time.Time {
	return n.fleetTime(n.opts.Clock().Add(time.Duration(n.testSkew.Load()))).UTC()
}

// statusTime is the time a status carries: this host's clock (shifted by
// testSkew in tests).
func (n *Node) statusTime() time.Time {
	return time.Now().Add(time.Duration(n.testSkew.Load())).UTC()
}

// fleetTime is t, a time of this host's clock, by the others' clocks:
// less this node's offset when it is beyond Options.MaxClockOffset.
func (n *Node) fleetTime(t time.Time) time.Time {
	if n.clockMeasured.Load() {
		if off := time.Duration(n.clockOffset.Load()); off.Abs() > n.opts.MaxClockOffset {
			return t.Add(-off)
		}
	}
	return t
}

// noteClockOffset records this node's offset as measured by a read of the
// statuses (self is this node's status of that read), and logs when it
// crosses Options.MaxClockOffset.
func (n *Node) noteClockOffset(self Status) {
	off := self.ClockOffset
	was := time.Duration(n.clockOffset.Swap(int64(off)))
	measured := n.clockMeasured.Swap(true)
	bad := func(d time.Duration) bool { return d.Abs() > n.opts.MaxClockOffset }
	switch {
	case bad(off) && (!measured || !bad(was)):
		n.log.Error("fleet: this host's clock is off from the other nodes': it publishes no expiry decision, and dates its events by their clocks, until it is fixed (NTP)",
			"offset", off.Round(time.Millisecond), "max", n.opts.MaxClockOffset)
	case !bad(off) && measured && bad(was):
		n.log.Info("fleet: this host's clock agrees with the other nodes' again", "offset", off.Round(time.Millisecond))
	}
}

// checkClock returns nil when this node's clock was measured within
// Options.MaxClockOffset of the fleet's median clock, else an error
// wrapping ErrClockOffset.
func (n *Node) checkClock() error {
	if !n.clockMeasured.Load() {
		return fmt.Errorf("%w: not measured yet (no status read from NATS)", ErrClockOffset)
	}
	off := time.Duration(n.clockOffset.Load())
	if off.Abs() > n.opts.MaxClockOffset {
		dir := "ahead of"
		if off < 0 {
			dir = "behind"
		}
		return fmt.Errorf("%w: %s %s the median of the nodes' clocks (at most %s): fix its time (NTP)",
			ErrClockOffset, off.Abs().Round(time.Second), dir, n.opts.MaxClockOffset)
	}
	return nil
}

// ClockWarning says why this node publishes no expiry decision when its
// clock was measured off from the others' (the error of Expire), "" when
// it is not.
func (n *Node) ClockWarning() string {
	if !n.clockMeasured.Load() {
		return ""
	}
	if err := n.checkClock(); err != nil {
		return err.Error()
	}
	return ""
}
