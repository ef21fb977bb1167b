package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Replayed events. A signature (sign.go) proves who published an event,
// not when: anyone who may publish to the stream could publish a genuine
// event of the past again (an allow an administrator has since undone, a
// deletion, an expiry decision) once the stream's own deduplication by
// Nats-Msg-Id has forgotten it, and every node would apply it again.
// Every event therefore carries, under its signature, when it was signed
// (event.Signed, set at each publish: an event queued in the outbox while
// the stream was unreachable is signed again when it is published at
// last, so that the outage's length does not count), and a node applies
// it only
//
//   - when the stream stored it within Options.ReplayWindow of that time,
//     either way (clock skew and a publish's retries fit in it), else it
//     is skipped as RejectStale, and
//   - once: an event whose id was applied in the window already is
//     skipped as RejectReplayed.
//
// The decision depends on the message only (the time the stream stored
// it, the same on every node, and the signed time), and on the events
// before it in stream order, never on the applying node's clock: every
// node skips the same events. A node that starts reads the window's
// events before its applied sequence again to know their ids
// (primeReplay). Events of builds before this one carry no signing time
// and are applied as before.

// replayGuard decides, in stream order, which signed events are stale or
// replayed. Only the applier uses it.
type replayGuard struct {
	// seen holds the ids of the events of the window: up to which stored
	// time another event with that id is a replay.
	seen map[string]time.Time
	// last is the last sequence decided, lastReason its decision, prev
	// and prevReason the one before: the same event delivered again (a
	// consumer recreated from the applied sequence, after an error at the
	// next one) is decided alike.
	last, prev             uint64
	lastReason, prevReason string
	// primed is set once the ids of the window before the applied
	// sequence are known (primeReplay), or its tries are spent
	// (primeTries).
	primed bool
	tries  int
	checks int
}

// primeTries is how many times primeReplay tries to read the window
// before the node applies the stream without it: a replay published
// within a window of the node's start could then be applied by it alone
// (the fleet's divergence check names it), which is better than a node
// that applies nothing.
const primeTries = 10

// replayPrune is how many decisions pass between two prunings of the ids
// the window no longer needs.
const replayPrune = 256

// check decides the event ev, stored by the stream at stored with
// sequence seq: "", RejectStale or RejectReplayed.
func (g *replayGuard) check(seq uint64, stored time.Time, ev *event, window time.Duration) string {
	switch {
	case seq == 0:
	case seq == g.last:
		return g.lastReason
	case seq == g.prev:
		return g.prevReason
	}
	reason := g.decide(stored, ev, window)
	g.prev, g.prevReason = g.last, g.lastReason
	g.last, g.lastReason = seq, reason
	return reason
}

func (g *replayGuard) decide(stored time.Time, ev *event, window time.Duration) string {
	if ev.Signed.IsZero() {
		return "" // a build before signing times: applied as before
	}
	if d := stored.Sub(ev.Signed); d > window || d < -window {
		return RejectStale
	}
	if g.seen == nil {
		g.seen = make(map[string]time.Time)
	}
	g.checks++
	if g.checks%replayPrune == 0 {
		// Decisions compare with the stored time, so pruning changes none
		// of them: an id is kept a window longer than it can matter, for
		// stored times that go back a little (a new stream leader).
		for id, until := range g.seen {
			if until.Add(window).Before(stored) {
				delete(g.seen, id)
			}
		}
	}
	until := ev.Signed.Add(window)
	prev, seen := g.seen[ev.ID]
	if !seen || until.After(prev) {
		g.seen[ev.ID] = until
	}
	if seen && !stored.After(prev) {
		return RejectReplayed
	}
	return ""
}

// primeTimeout bounds each read of primeReplay.
const primeTimeout = 5 * time.Second

// primeReplay reads the events the stream stored in the replay window
// before the applied sequence (three windows before it: an event counts
// for a window after its signing time, which is within a window of when
// it was stored, and stored times may go back a little) and decides them
// as applying did, so that the node skips the same replays as the nodes
// that did not restart. Events the stream no longer holds (purged after
// a snapshot) are left out.
func (n *Node) primeReplay(applied uint64) (err error) {
	g := &n.replay
	if g.primed {
		return nil
	}
	defer func() {
		if err == nil {
			return
		}
		// Read again from the start at the next try, if any.
		tries := g.tries + 1
		*g = replayGuard{tries: tries}
		if tries >= primeTries && n.ctx.Err() == nil {
			n.log.Warn("fleet: applying the stream without the ids of the replay window before it", "applied", applied, "tries", tries, "err", err)
			g.primed, err = true, nil
		}
	}()
	if applied == 0 {
		g.primed = true
		return nil
	}
	ctx, cancel := context.WithTimeout(n.ctx, primeTimeout)
	defer cancel()
	s, err := n.js.Stream(ctx, n.opts.Stream)
	if err != nil {
		return fmt.Errorf("fleet: replay window: %w", err)
	}
	at, err := s.GetMsg(ctx, applied)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		g.primed = true // purged: nothing before it either
		return nil
	}
	if err != nil {
		return fmt.Errorf("fleet: replay window: event %d: %w", applied, err)
	}
	from := at.Time.Add(-3 * n.opts.ReplayWindow)
	cons, err := n.js.OrderedConsumer(ctx, n.opts.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{n.opts.subject()},
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy,
		OptStartTime:   &from,
	})
	if err != nil {
		return fmt.Errorf("fleet: replay window: consumer: %w", err)
	}
	var read int
	for n.ctx.Err() == nil {
		batch, err := cons.Fetch(256, jetstream.FetchMaxWait(primeTimeout))
		if err != nil {
			return fmt.Errorf("fleet: replay window: %w", err)
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			md, err := msg.Metadata()
			if err != nil {
				return fmt.Errorf("fleet: replay window: event metadata: %w", err)
			}
			if md.Sequence.Stream >= applied {
				g.primed = true
				n.log.Debug("fleet: replay window read", "events", read, "from", from, "applied", applied)
				return nil
			}
			read++
			in := incoming{seq: md.Sequence.Stream, subject: msg.Subject(), header: msg.Headers(), stored: md.Timestamp, data: msg.Data()}
			if v := n.verdict(in); v.reason == "" && v.ev.V <= eventVersion {
				g.check(in.seq, in.stored, v.ev, n.opts.ReplayWindow)
			}
		}
		if err := batch.Error(); err != nil {
			return fmt.Errorf("fleet: replay window: %w", err)
		}
		if got == 0 {
			return fmt.Errorf("fleet: replay window: the stream delivered nothing before event %d", applied)
		}
	}
	return n.ctx.Err()
}
