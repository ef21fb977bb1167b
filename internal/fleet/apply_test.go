package fleet

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/store"
)

// applyGate holds a node's applier before each event (Options.beforeApply)
// until the test lets it go on, so that the events read ahead of the one
// being applied are known to wait in the consumer.
type applyGate struct {
	mu    sync.Mutex
	seen  map[uint64]int // sequence → times the applier reached it
	calls int
	held  uint64        // the event last reached
	next  chan struct{} // one event per token
	open  chan struct{} // closed: no more holding
}

func newApplyGate() *applyGate {
	return &applyGate{seen: map[uint64]int{}, next: make(chan struct{}, 256), open: make(chan struct{})}
}

func (g *applyGate) before(seq uint64) {
	g.mu.Lock()
	g.seen[seq]++
	g.calls++
	g.held = seq
	g.mu.Unlock()
	select {
	case <-g.next:
	case <-g.open:
	case <-time.After(20 * time.Second): // a test that failed meanwhile
	}
}

// release lets k more events through.
func (g *applyGate) release(k int) {
	for range k {
		g.next <- struct{}{}
	}
}

// waitHeld waits until the applier has reached calls events: it holds
// the last one.
func (g *applyGate) waitHeld(t *testing.T, calls int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("the applier at its event %d", calls), func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.calls >= calls
	})
}

// TestReadAheadResumes: a node catching up on events that two other
// nodes published, interleaved, receives and verifies them ahead of the
// one it applies. Its consumer recreated while events wait read ahead,
// then the node stopped and started again from its store, each time it
// goes on from the applied sequence recorded in the store: every event
// is applied once, in stream order, and the state hash agrees with the
// other nodes'.
func TestReadAheadResumes(t *testing.T) {
	f := newTestFleet(t)
	ctx := context.Background()
	late := f.members[2]
	late.stop()
	f.members[2] = nil
	// Copies of the same campaigns reported through mx0 and mx1 in turn:
	// each event joins the campaigns earlier events of the other node
	// made, so the order they are applied in matters.
	const events = 18
	for i := range events {
		f.report(i%2, copyOf(t, i%len(texts), uint64(300+i)), store.KindSpam, fmt.Sprintf("r%d", i))
	}
	last := f.members[0].node.Status(ctx, false).StreamLast

	gate := newApplyGate()
	f.mod = func(o *Options) { o.beforeApply = gate.before }
	m := f.startMember(2, late.dir)
	f.mod = nil
	f.members[2] = m

	// Four events applied, the fifth held: the consumer has read ahead.
	gate.release(4)
	gate.waitHeld(t, 5)
	if got := m.node.Status(ctx, false).Applied; got >= last {
		t.Fatalf("applied %d of %d before the consumer restart: nothing left to read ahead", got, last)
	}
	select {
	case m.node.unstall <- struct{}{}:
	case <-time.After(10 * time.Second):
		t.Fatal("the consumer took no restart request")
	}
	gate.release(4)
	gate.waitHeld(t, 9)
	// The new consumer started from the applied sequence: the applier
	// reached that event again (and skipped it, applied already).
	gate.mu.Lock()
	var twice []uint64
	for seq, k := range gate.seen {
		if k > 1 {
			twice = append(twice, seq)
		}
	}
	gate.mu.Unlock()
	if len(twice) != 1 {
		t.Fatalf("events the applier reached twice after the consumer restart: %v, want one", twice)
	}
	t.Logf("consumer recreated: event %d delivered again", twice[0])

	// The node stops while it holds an event and others wait read ahead:
	// it applies the one it holds (an event is applied whole), no other.
	gate.mu.Lock()
	held := gate.held
	gate.mu.Unlock()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		m.node.Close()
	}()
	<-m.node.ctx.Done()
	close(gate.open)
	<-closed
	m.st.Close()
	f.members[2] = nil
	p, err := func() (store.Progress, error) {
		st, err := store.Open(m.dir, storeOptions())
		if err != nil {
			return store.Progress{}, err
		}
		defer st.Close()
		return st.AppliedProgress(ctx)
	}()
	if err != nil {
		t.Fatal(err)
	}
	if p.Seq != held || p.Partial || held >= last {
		t.Fatalf("the store applied %+v of %d when the node stopped holding event %d: want that event whole", p, last, held)
	}
	t.Logf("stopped with event %d of %d applied", p.Seq, last)

	f.members[2] = f.startMember(2, m.dir)
	f.requireEqualHashes("after the restarts")
	for i := range texts {
		if v := f.check(2, copyOf(t, i, 900)); v.Campaign == 0 {
			t.Fatalf("mx2 does not find campaign text %d after catching up: %+v", i, v)
		}
	}
}
