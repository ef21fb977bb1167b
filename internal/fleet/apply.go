package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/store"
)

// applyLoop applies the stream to the local store, in stream order, for
// as long as the node runs; it resumes after any NATS trouble from the
// last applied sequence.
func (n *Node) applyLoop() {
	defer n.wg.Done()
	for n.ctx.Err() == nil {
		if err := n.setup(n.ctx); err != nil {
			n.setErr(err)
			if errors.Is(err, ErrBehind) {
				n.log.Error("fleet: cannot apply the stream", "err", err)
			}
			n.sleep(time.Second)
			continue
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
		case err != nil:
			n.setErr(err)
			n.log.Warn("fleet: applying the stream stopped, resuming", "err", err)
			n.sleep(500 * time.Millisecond)
		}
	}
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
// transactions) and applies each event.
func (n *Node) consume() error {
	n.mu.Lock()
	start := max(n.applied, 1)
	n.mu.Unlock()
	cons, err := n.js.OrderedConsumer(n.ctx, n.opts.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{n.opts.subject()},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    start,
	})
	if err != nil {
		return fmt.Errorf("fleet: consumer: %w", err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("fleet: consumer: %w", err)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-n.ctx.Done():
		case <-done:
		}
		it.Stop()
	}()
	for {
		msg, err := it.Next()
		if err != nil {
			return fmt.Errorf("fleet: next event: %w", err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("fleet: event metadata: %w", err)
		}
		if err := n.applyEvent(md.Sequence.Stream, msg.Data()); err != nil {
			return err
		}
	}
}

// applyEvent applies the event data at stream sequence seq, once.
func (n *Node) applyEvent(seq uint64, data []byte) error {
	n.mu.Lock()
	applied := n.applied
	n.mu.Unlock()
	if seq < applied {
		return nil
	}
	ev, err := decodeEvent(data)
	if err != nil {
		n.log.Error("fleet: skipping a malformed event", "seq", seq, "err", err)
		ev = &event{}
	}
	if seq == applied && !ev.idempotent() {
		return nil
	}
	if ev.V > eventVersion {
		// Applying it partly, or skipping it, would make this node's
		// state differ from the upgraded nodes': wait for the upgrade.
		return fmt.Errorf("fleet: event %d: %w (version %d, this node applies up to %d)", seq, ErrNewerEvent, ev.V, eventVersion)
	}
	// Not n.ctx: an event is applied whole even while the node stops.
	ctx := campaign.Applying(store.WithApplied(context.Background(), seq), ev.Time)
	var res applyResult
	switch ev.Type {
	case evReport:
		res, err = n.applyReports(ctx, seq, ev)
	case evState:
		err = n.engine().SetState(ctx, ev.Campaign, ev.State)
	case evDelete:
		err = n.engine().Delete(ctx, ev.Campaign)
	case evExpire:
		_, err = n.engine().ExpireBefore(ctx, ev.Cutoff)
	case evHits:
		err = n.engine().ApplyHits(ctx, ev.Hits)
	default:
		n.log.Warn("fleet: skipping an event of unknown type", "seq", seq, "type", ev.Type)
	}
	if err != nil && localError(err) {
		return fmt.Errorf("fleet: apply event %d: %w", seq, err)
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		n.log.Warn("fleet: event applied with an error (the same on every node)", "seq", seq, "type", ev.Type, "err", err)
	}
	// Events that changed nothing still count as applied.
	if got, err := n.st.Applied(ctx); err != nil {
		return err
	} else if got < seq {
		if err := n.st.MarkApplied(context.Background(), seq); err != nil {
			return fmt.Errorf("fleet: apply event %d: %w", seq, err)
		}
	}
	res.seq, res.err = seq, err
	n.mu.Lock()
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

// applyReports applies a report event as one batch; a report that fails
// (the same way on every node) is left out and the rest applied.
func (n *Node) applyReports(ctx context.Context, seq uint64, ev *event) (applyResult, error) {
	reqs := make([]campaign.ReportRequest, len(ev.Reports))
	for i, r := range ev.Reports {
		reqs[i] = campaign.ReportRequest{Evidence: r.Evidence, Raw: r.Raw, Kind: r.Kind, Reporter: r.Reporter}
		if r.Evidence == nil && r.Raw == nil {
			reqs[i].Raw = []byte{} // a report of nothing: skipped, as on every node
		}
	}
	res := applyResult{outs: make([]campaign.ReportOutcome, len(reqs)), errs: make([]error, len(reqs))}
	for i := 0; i < len(reqs); {
		got, err := n.engine().ReportBatch(ctx, reqs[i:])
		copy(res.outs[i:], got)
		if err == nil {
			break
		}
		if localError(err) {
			return res, err
		}
		j := i + len(got)
		n.log.Warn("fleet: report of an event not applied", "seq", seq, "report", j, "err", err)
		res.errs[j] = errors.Unwrap(err) // the *BatchError's cause
		i = j + 1
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
