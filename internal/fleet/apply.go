package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/store"
)

// applyLoop applies the stream to the local store, in stream order, for
// as long as the node runs; it resumes after any NATS trouble from the
// last applied sequence.
func (n *Node) applyLoop() {
	defer n.wg.Done()
	// Setting up is retried soon at first, each try short: the servers of
	// a fleet that starts together come up within moments of each other,
	// and a request JetStream got before its cluster had a leader is never
	// answered, so a long try would wait for nothing. Setting up is
	// idempotent; later tries wait longer (a loaded cluster).
	tries := 0
	setupFailed := false
	for n.ctx.Err() == nil {
		wait := setupFirstWait
		if tries >= 5 {
			wait = n.opts.PublishTimeout
		}
		if err := n.setup(n.ctx, min(wait, n.opts.PublishTimeout)); err != nil {
			n.setErr(err)
			setupFailed = true
			if errors.Is(err, ErrBehind) {
				n.log.Error("fleet: cannot apply the stream", "err", err)
			}
			n.sleep(min(100*time.Millisecond<<min(tries, 5), 2*time.Second))
			tries++
			continue
		}
		tries = 0
		if setupFailed { // set up now: that error is over
			n.setErr(nil)
			setupFailed = false
		}
		err := n.consume()
		if n.ctx.Err() != nil {
			return
		}
		switch {
		case errors.Is(err, ErrNewerEvent):
			n.setErr(err)
			n.log.Error("fleet: cannot apply the stream: upgrade this node", "err", err)
			n.sleep(10 * time.Second)
		case errors.Is(err, ErrStalled):
			// Not an error to show: the new consumer goes on at once.
		case err != nil:
			n.setErr(err)
			n.log.Warn("fleet: applying the stream stopped, resuming", "err", err)
			n.sleep(500 * time.Millisecond)
		}
	}
}

// ErrStalled ends a consumer that delivered nothing for StallAfter while
// the stream held events after the applied sequence (watchLoop).
var ErrStalled = errors.New("fleet: the stream consumer stalled")

// watchLoop recreates the stream consumer when it stalls: the applier
// waited for the next event for a whole StallAfter while the stream held
// events it had not applied. The client's ordered consumer recovers from
// missed heartbeats and gaps by itself; this is the bound on anything it
// does not recover from (a consumer lost while every server restarted was
// seen to leave it waiting with no error). Recreating it is safe: the
// new one starts from the applied sequence kept in the store.
func (n *Node) watchLoop() {
	defer n.wg.Done()
	var prevApplied, prevLast uint64
	armed := false // the previous tick saw the applier waiting
	for n.sleep(n.opts.StallAfter) {
		var last uint64
		info, ok := n.streamState(n.ctx)
		if ok {
			last = info.State.LastSeq
		}
		n.mu.Lock()
		applied := n.applied
		n.mu.Unlock()
		waiting := n.waiting.Load()
		if armed && ok && waiting && applied == prevApplied && prevLast > applied {
			n.log.Warn("fleet: the stream consumer delivered nothing while events waited; recreating it",
				"applied", applied, "stream_last", last, "waited", n.opts.StallAfter)
			n.mu.Lock()
			n.restarts++
			n.mu.Unlock()
			select {
			case n.unstall <- struct{}{}:
			default:
			}
			waiting = false
		}
		armed = ok && waiting
		prevApplied, prevLast = applied, last
	}
}

// streamState returns the stream's information (its last sequence and
// size, its replicas); false when the node is not set up or connected,
// or the stream does not answer within PublishTimeout (or before ctx
// ends). The query runs to its own timeout even when ctx ends first (a
// /readyz with a shorter budget), and concurrent callers share it, so
// that its verdict (streamUnreachable) is recorded either way. While the
// last verdict is that the stream is unreachable, callers do not wait:
// the query runs on in the background and its verdict is the next
// caller's (a partition must not make every /readyz take its budget).
func (n *Node) streamState(ctx context.Context) (*jetstream.StreamInfo, bool) {
	if !n.isReady() || !n.nc.IsConnected() {
		return nil, false
	}
	if n.streamUnreachable() {
		n.streamQuery.DoChan("info", n.queryStream)
		return nil, false
	}
	ch := n.streamQuery.DoChan("info", n.queryStream)
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, false
		}
		return r.Val.(*jetstream.StreamInfo), true
	case <-ctx.Done():
		return nil, false
	}
}

// queryStream asks for the stream's information (streamState's query)
// and records the verdict.
func (n *Node) queryStream() (any, error) {
	start := time.Now()
	qctx, cancel := context.WithTimeout(n.ctx, n.opts.PublishTimeout)
	defer cancel()
	st, err := n.js.Stream(qctx, n.opts.Stream)
	var info *jetstream.StreamInfo
	if err == nil {
		info, err = st.Info(qctx)
	}
	if n.ctx.Err() == nil {
		// A server cut off from the others answers with the stream as
		// its own copy has it, and no leader: the stream takes no events.
		n.streamOK.Store(err == nil && (info.Cluster == nil || info.Cluster.Leader != ""))
		n.streamAt.Store(start.UnixNano())
	}
	return info, err
}

// streamUnreachable reports whether the node's last query of the stream
// got no answer within its timeout or an answer without a stream leader,
// or its last publish got no answer (pubDownAt).
func (n *Node) streamUnreachable() bool {
	return n.pubDownAt.Load() != 0 || (n.streamAt.Load() != 0 && !n.streamOK.Load())
}

// publishFailed records a publish that got no answer. A query's answer
// alone does not end it while reports wait in the outbox: a server cut
// off while it led the stream still names itself leader for a while,
// and only an acknowledged publish proves the stream takes events again.
func (n *Node) publishFailed() {
	n.pubDownAt.Store(time.Now().UnixNano())
}

// publishAcked records an acknowledged publish: the stream answers.
func (n *Node) publishAcked() {
	n.pubDownAt.Store(0)
	n.streamOK.Store(true)
	n.streamAt.Store(time.Now().UnixNano())
}

// localError tells errors of this node's store (the event is not
// applied, and is retried) from those of the event (the same on every
// node: it is skipped).
func localError(err error) bool {
	return errors.Is(err, store.ErrDiskFull) || errors.Is(err, store.ErrClosed) ||
		errors.Is(err, store.ErrReadOnly) || errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded)
}

// consume reads the stream from the applied sequence (the last applied
// event again: applied again when idempotent, its effect may span several
// transactions) and applies each event. The events are received,
// verified and decoded ahead of the one being applied (readAhead), in
// stream order: what does not depend on the store overlaps its writes.
func (n *Node) consume() error {
	n.mu.Lock()
	applied := n.applied
	n.mu.Unlock()
	start := max(applied, 1)
	if err := n.primeReplay(applied); err != nil {
		return err
	}
	cons, err := n.js.OrderedConsumer(n.ctx, n.opts.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{n.opts.subject()},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    start,
	})
	if err != nil {
		return fmt.Errorf("fleet: consumer: %w", err)
	}
	it, err := cons.Messages(jetstream.PullHeartbeat(consumerHeartbeat))
	if err != nil {
		return fmt.Errorf("fleet: consumer: %w", err)
	}
	select { // a request of the consumer before this one
	case <-n.unstall:
	default:
	}
	done := make(chan struct{})
	var stalled atomic.Bool
	var wg sync.WaitGroup
	defer wg.Wait() // the reader is gone before another consumer starts
	defer close(done)
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-n.ctx.Done():
		case <-done:
		case <-n.unstall:
			stalled.Store(true)
		}
		it.Stop()
	}()
	ahead := make(chan received, readAhead)
	wg.Add(1)
	go func() {
		defer wg.Done()
		n.readAhead(it, ahead, done)
	}()
	for {
		n.waiting.Store(true)
		r := <-ahead
		n.waiting.Store(false)
		if stalled.Load() {
			return ErrStalled
		}
		if r.err != nil {
			return r.err
		}
		if err := n.ctx.Err(); err != nil {
			return err // stopping: events read ahead are left to the next start
		}
		if n.dropEvents.Load() {
			continue
		}
		if h := n.opts.beforeApply; h != nil {
			h(r.in.seq)
		}
		if err := n.applyVerified(r.in, r.verdict); err != nil {
			return err
		}
		n.clearErr() // applying again: an earlier error is over
	}
}

// consumerHeartbeat is how often the server serving the consumer says it
// is alive while no event comes. The client recreates the consumer after
// two missed heartbeats (its default waits 10 s): when that server is
// cut off from this one (a partition; the consumer is placed on any
// server holding the stream), the node follows the stream again within
// seconds. A recreation that waits on the cut-off server itself is
// watchLoop's to end (Options.StallAfter).
const consumerHeartbeat = time.Second

// readAhead bounds the events received and verified ahead of the one
// being applied: enough to keep the applier busy between two deliveries,
// few because each may be as large as a NATS message.
const readAhead = 4

// received is a message of the stream as readAhead passes it on: verified
// and decoded, or the error that ends the consumer.
type received struct {
	in      incoming
	verdict verdict
	err     error
}

// readAhead receives the messages of it in stream order, verifies and
// decodes each (n.verdict: it depends on the message alone, not on the
// store) and passes them on to out, until it fails (after Stop, too: its
// error is the last thing passed on) or done is closed.
func (n *Node) readAhead(it jetstream.MessagesContext, out chan<- received, done <-chan struct{}) {
	for {
		var r received
		msg, err := it.Next()
		if err != nil {
			r.err = fmt.Errorf("fleet: next event: %w", err)
		} else if md, err := msg.Metadata(); err != nil {
			r.err = fmt.Errorf("fleet: event metadata: %w", err)
		} else {
			r.in = incoming{seq: md.Sequence.Stream, subject: msg.Subject(), header: msg.Headers(), stored: md.Timestamp, data: msg.Data()}
			r.verdict = n.verdict(r.in)
		}
		select {
		case out <- r:
		case <-done:
			return
		}
		if r.err != nil {
			return
		}
	}
}

// incoming is one message of the stream as the consumer delivers it.
type incoming struct {
	seq     uint64
	subject string
	header  nats.Header
	stored  time.Time // when the stream stored it (the same on every node)
	data    []byte
}

// applyMsg verifies a message of the stream (sign.go), checks that it is
// no replay (replay.go) and applies its event, once; an event that does
// not verify, cannot be read, or is a replay, is skipped: counted as
// applied, as on every node.
func (n *Node) applyMsg(in incoming) error {
	return n.applyVerified(in, n.verdict(in))
}

// applyVerified is applyMsg of a message verified and decoded already
// (v is n.verdict(in)).
func (n *Node) applyVerified(in incoming, v verdict) error {
	n.mu.Lock()
	applied := n.applied
	n.mu.Unlock()
	if in.seq < applied {
		return nil
	}
	ev, reason := v.ev, v.reason
	if reason == "" && ev.V <= eventVersion {
		reason = n.replay.check(in.seq, in.stored, ev, n.opts.ReplayWindow)
	}
	if reason != "" {
		if in.seq == applied {
			return nil // skipped already
		}
		return n.reject(in, v.origin, reason, ev, v.err)
	}
	return n.applyEvent(in.seq, ev)
}

// verdict is what verifying a message of the stream and decoding its
// event found: reason is "" for an event to apply (unless a replay),
// else why it is skipped; err is the decoding error, if any.
type verdict struct {
	ev     *event
	origin string
	reason string
	err    error
}

// verdict verifies a message of the stream and decodes its event.
func (n *Node) verdict(in incoming) verdict {
	origin, reason := n.trust.verify(in.subject, in.header, in.data)
	ev, err := decodeEvent(in.data)
	switch {
	case reason == RejectUnsigned && err == nil && ev.Node == origin && n.trust.unsignedAllowed(origin, in.stored):
		reason = "" // an older build's event, in the upgrade window
	case reason != "":
	case err != nil:
		reason = RejectMalformed
	case ev.V <= eventVersion && ev.Node != origin:
		// Signed by one node in another's name.
		reason = RejectWrongNode
	}
	return verdict{ev: ev, origin: origin, reason: reason, err: err}
}

// reject skips the event at in.seq: it is marked applied (so that the
// stream goes on, as on every node), counted and logged.
func (n *Node) reject(in incoming, origin, reason string, ev *event, decodeErr error) error {
	args := []any{"seq", in.seq, "subject", in.subject, "reason", reason, "node", origin, "key", in.header.Get(hdrKey), "bytes", len(in.data)}
	if decodeErr != nil {
		args = append(args, "err", decodeErr)
	}
	switch reason {
	case RejectStale, RejectReplayed:
		args = append(args, "id", ev.ID, "signed", ev.Signed, "stored", in.stored, "window", n.opts.ReplayWindow)
		n.log.Error("fleet: skipping an event published again (signed too long before the stream stored it, or applied already)", args...)
	default:
		n.log.Error("fleet: skipping an event that does not verify", args...)
	}
	if err := n.st.MarkApplied(context.Background(), in.seq); err != nil {
		return fmt.Errorf("fleet: skip event %d: %w", in.seq, err)
	}
	var w chan applyResult
	n.mu.Lock()
	n.rejected[reason]++
	n.halted = nil
	n.applied = in.seq
	close(n.appliedCh)
	n.appliedCh = make(chan struct{})
	if ev != nil {
		w = n.waiters[ev.ID]
		delete(n.waiters, ev.ID)
	}
	n.mu.Unlock()
	if ev != nil {
		n.prov.applied(n.engine(), ev.ID)
	}
	if w != nil { // this node's own event: its key is not the fleet's
		w <- applyResult{seq: in.seq, err: fmt.Errorf("%w: %s", ErrRejected, reason)}
	}
	return nil
}

// ErrRejected is the result of an event this node published that the
// fleet's nodes skip (its signature does not verify against their list
// of node keys, or it was signed further than the replay window from when
// the stream stored it: this host's clock is off).
var ErrRejected = errors.New("fleet: event skipped by the fleet's nodes")

// applyEvent applies ev, at stream sequence seq and verified, once.
func (n *Node) applyEvent(seq uint64, ev *event) error {
	n.mu.Lock()
	applied := n.applied
	n.mu.Unlock()
	if seq < applied {
		return nil
	}
	var err error
	var resume *store.Progress
	if seq == applied && !ev.idempotent() {
		// Applied already, unless a report event the node was killed in
		// the middle of: resumed where it stopped.
		p, err := n.st.AppliedProgress(context.Background())
		if err != nil {
			return fmt.Errorf("fleet: apply event %d: %w", seq, err)
		}
		if !p.Partial || p.Seq != seq || ev.Type != evReport {
			return nil
		}
		resume = &p
	}
	if ev.V > eventVersion {
		// Applying it partly, or skipping it, would make this node's
		// state differ from the upgraded nodes': wait for the upgrade,
		// halted, and say so (Status.Halted: /readyz, fleet status, the
		// nddmilter_fleet_halted metric). It is signed by a node of the
		// fleet (applyMsg), so a node of a newer build published it.
		n.mu.Lock()
		n.halted = &Halt{Seq: seq, Version: ev.V}
		n.mu.Unlock()
		return fmt.Errorf("fleet: event %d: %w (version %d, this node applies up to %d)", seq, ErrNewerEvent, ev.V, eventVersion)
	}
	// Not n.ctx: an event is applied whole even while the node stops.
	// Report events apply in rounds (applyReports), the others in one
	// transaction or idempotently.
	ctx := context.Background()
	o := campaign.ApplyOptions{Seq: seq, Time: ev.Time}
	var res applyResult
	switch ev.Type {
	case evReport:
		res, err = n.applyReports(ctx, o, ev, resume)
	case evState:
		err = n.engine().Ingester.ApplyState(ctx, o, ev.Campaign, ev.State)
	case evDelete:
		err = n.engine().Ingester.ApplyDelete(ctx, o, ev.Campaign)
	case evExpire:
		_, err = n.engine().Ingester.ApplyExpiry(ctx, o, ev.Cutoff)
	case evHits:
		err = n.engine().Ingester.ApplyHits(ctx, o, ev.Hits)
	default:
		n.log.Warn("fleet: skipping an event of unknown type", "seq", seq, "type", ev.Type)
	}
	if err != nil && localError(err) {
		return fmt.Errorf("fleet: apply event %d: %w", seq, err)
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		n.log.Warn("fleet: event applied with an error (the same on every node)", "seq", seq, "type", ev.Type, "err", err)
	}
	// Events that changed nothing (or not their last report) still
	// count as applied.
	if got, err := n.st.AppliedProgress(ctx); err != nil {
		return err
	} else if got.Seq < seq || got.Partial {
		if err := n.st.MarkApplied(context.Background(), seq); err != nil {
			return fmt.Errorf("fleet: apply event %d: %w", seq, err)
		}
	}
	res.seq, res.err = seq, err
	n.prov.applied(n.engine(), ev.ID) // in the store now: no longer provisional
	n.mu.Lock()
	n.halted = nil // an event after a halt: the event was taken out of the stream
	n.applied = seq
	close(n.appliedCh)
	n.appliedCh = make(chan struct{})
	w := n.waiters[ev.ID]
	delete(n.waiters, ev.ID)
	n.mu.Unlock()
	if w != nil {
		w <- res // buffered
	}
	return nil
}

// applyReports applies a report event as one batch, in rounds
// (store.Round): each round matches the reports left against the store
// and commits those that fit in one transaction, recording how far the
// event got, so that a node killed in the middle of an event resumes it
// (resume: where it stopped) with the result of an uninterrupted run. A
// report that fails (the same way on every node) is left out and the
// rest applied.
func (n *Node) applyReports(ctx context.Context, applied campaign.ApplyOptions, ev *event, resume *store.Progress) (applyResult, error) {
	seq := applied.Seq
	reqs := make([]campaign.ReportRequest, len(ev.Reports))
	for i, r := range ev.Reports {
		reqs[i] = campaign.ReportRequest{Evidence: r.Evidence, Raw: r.Raw, Kind: r.Kind, Reporter: r.Reporter}
		if r.ReporterHash != "" {
			reqs[i].Reporter, reqs[i].ReporterHashed = r.ReporterHash, true
		}
		if r.Evidence == nil && r.Raw == nil {
			reqs[i].Raw = []byte{} // a report of nothing: skipped, as on every node
		}
	}
	round := &store.Round{Progress: store.Progress{Seq: seq, Partial: true}, Total: len(reqs)}
	if resume != nil {
		round.Progress = *resume
		n.log.Info("fleet: resuming a report event applied in part", "seq", seq, "step", resume.Step, "of", len(reqs))
	}
	applied.Round = round
	res := applyResult{outs: make([]campaign.ReportOutcome, len(reqs)), errs: make([]error, len(reqs))}
	for step := round.Step; step < len(reqs); {
		round.Step = step
		got, err := n.engine().Ingester.ApplyReports(ctx, applied, reqs[step:])
		copy(res.outs[step:], got)
		step += len(got)
		if err == nil {
			continue
		}
		if localError(err) {
			return res, err
		}
		n.log.Warn("fleet: report of an event not applied", "seq", seq, "report", step, "err", err)
		res.errs[step] = errors.Unwrap(err) // the *BatchError's cause
		step++
	}
	for i := range res.outs {
		res.outs[i].Replication = campaign.Replicated
	}
	return res, nil
}

// applyResult is what applying an event did, for the node that
// published it and waits for it.
type applyResult struct {
	seq  uint64
	outs []campaign.ReportOutcome
	errs []error // per report (nil: applied)
	err  error
}
