package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/store"
)

// errUnreachable is the cause of a publish that was not tried: the node
// is not connected to NATS, the stream is not set up yet, or it did not
// answer the node's last publish or query.
var errUnreachable = errors.New("fleet: NATS unreachable")

// ErrTooLarge is returned for a report larger than what one NATS message
// can carry.
var ErrTooLarge = errors.New("fleet: report larger than the NATS maximum payload")

// eventBudget is the share of the NATS maximum payload a batch of reports
// fills before another event starts.
const eventBudget = 0.75

// Report publishes reports as events and answers with their outcome once
// this node has applied them (Replication Replicated), or, when NATS is
// unreachable, queues them in the store's outbox (Replication Queued, no
// campaign yet). The reports are signed here, once (every node ingests
// their evidence), then handed to the batcher, which carries them in as
// few events as fit in NATS messages, shared with the reports of
// concurrent calls (batch.go). It implements campaign.Writer.
func (n *Node) Report(ctx context.Context, reqs []campaign.ReportRequest) ([]campaign.ReportOutcome, error) {
	limit := n.eventLimit()
	// A report that cannot be signed, or is too large for an event, stops
	// the batch there (a *campaign.BatchError).
	evs, stopErr := n.engine().Ingester.Evidence(ctx, reqs)
	reports := make([]eventReport, 0, len(evs))
	sizes := make([]int64, 0, len(evs))
	for j, e := range evs {
		r := reqs[j]
		sz := int64(len(e))*4/3 + int64(len(r.Reporter)) + 32
		if sz > limit {
			stopErr = &campaign.BatchError{Index: j, Err: fmt.Errorf("%w (%d bytes of evidence)", ErrTooLarge, len(e))}
			break
		}
		reports = append(reports, eventReport{Evidence: e, Kind: r.Kind, Reporter: r.Reporter})
		sizes = append(sizes, sz)
	}
	if len(reports) == 0 {
		return nil, stopErr
	}
	j := newReportJob(reports, sizes)
	taken, err := n.batch(ctx, j)
	if err != nil {
		return nil, &campaign.BatchError{Index: 0, Err: err}
	}
	if !taken {
		// The node stopped: the reports go to the outbox from here.
		carry := &piece{job: j, to: len(j.reports)}
		for carry != nil {
			n.publishReports(n.gather(&carry), nil)
		}
	}
	outs, err := j.result()
	if err != nil {
		return outs, err
	}
	return outs, stopErr
}

// SetState publishes a campaign's new state and waits for its local
// application. It implements campaign.Writer.
func (n *Node) SetState(ctx context.Context, id store.CampaignID, s store.State) error {
	ev := n.newEvent(evState)
	ev.Campaign, ev.State = id, s
	return n.submitAdmin(ctx, ev)
}

// Delete publishes a campaign's deletion and waits for its local
// application. It implements campaign.Writer.
func (n *Node) Delete(ctx context.Context, id store.CampaignID) error {
	ev := n.newEvent(evDelete)
	ev.Campaign = id
	return n.submitAdmin(ctx, ev)
}

// Expire publishes the decision to expire the campaigns last seen before
// cutoff. It is not queued: the next decision replaces it. While this
// host's clock is off from the other nodes' (clock.go) it publishes
// nothing and returns an error wrapping ErrClockOffset.
func (n *Node) Expire(ctx context.Context, cutoff time.Time) error {
	if err := n.checkClock(); err != nil {
		return err
	}
	ev := n.newEvent(evExpire)
	ev.Cutoff = cutoff
	data, err := ev.encode()
	if err != nil {
		return err
	}
	_, err = n.publish(ctx, ev.ID, data)
	return err
}

func (n *Node) newEvent(typ string) *event {
	return &event{ID: newEventID(n.opts.Node), V: jsonVersion, Type: typ, Node: n.opts.Node, Time: n.eventTime()}
}

// submitAdmin submits an administrative event; its result is the store's
// (store.ErrNotFound for an unknown campaign).
func (n *Node) submitAdmin(ctx context.Context, ev *event) error {
	res, queued, err := n.submit(ctx, ev, true)
	if err != nil || queued {
		return err
	}
	return res.err
}

// submit stores ev in the outbox, publishes it and removes it from the
// outbox, then (wait) waits until this node applied it. queued is true
// when NATS was unreachable: ev stays in the outbox and the outbox loop
// publishes it later.
func (n *Node) submit(ctx context.Context, ev *event, wait bool) (res applyResult, queued bool, err error) {
	ch, seq, queued, err := n.publishEvent(ctx, ev, wait)
	if err != nil || queued || !wait {
		return res, queued, err
	}
	return n.awaitApply(ctx, ev, ch, seq), false, nil
}

// publishEvent stores ev in the outbox, publishes it and removes it from
// the outbox; with wait, ch then receives its result once this node
// applied it (awaitApply). queued is true when NATS was unreachable: ev
// stays in the outbox and the outbox loop publishes it later.
func (n *Node) publishEvent(ctx context.Context, ev *event, wait bool) (ch chan applyResult, seq uint64, queued bool, err error) {
	data, err := ev.encode()
	if err != nil {
		return nil, 0, false, err
	}
	if max := n.nc.MaxPayload(); max > 0 && int64(len(data)) > max {
		return nil, 0, false, fmt.Errorf("%w (%d bytes)", ErrTooLarge, len(data))
	}
	oid, err := n.st.OutboxPut(ctx, data)
	if err != nil {
		return nil, 0, false, fmt.Errorf("fleet: queue %s event: %w", ev.Type, err)
	}
	if wait {
		ch = make(chan applyResult, 1)
		n.mu.Lock()
		n.waiters[ev.ID] = ch
		n.mu.Unlock()
	}
	seq, err = n.publish(ctx, ev.ID, data)
	if err != nil {
		n.mu.Lock()
		delete(n.waiters, ev.ID)
		n.queued++
		n.mu.Unlock()
		n.qlog.queued(n.log, ev.Type, len(ev.Reports), err, time.Now())
		n.prov.add(n.engine(), ev) // protects this host until applied
		return nil, 0, true, nil
	}
	if err := n.st.OutboxDelete(ctx, oid); err != nil {
		n.log.Warn("fleet: outbox", "err", err) // published again later: deduplicated
	}
	return ch, seq, false, nil
}

// awaitApply waits (at most ApplyTimeout) until this node applied ev,
// published at seq, and returns the result; past the wait, or when ctx
// ends, every report of ev is Replicated with its outcome unknown.
func (n *Node) awaitApply(ctx context.Context, ev *event, ch chan applyResult, seq uint64) applyResult {
	t := time.NewTimer(n.opts.ApplyTimeout)
	defer t.Stop()
	select {
	case res := <-ch:
		return res
	case <-t.C:
	case <-ctx.Done():
	}
	n.mu.Lock()
	delete(n.waiters, ev.ID)
	n.mu.Unlock()
	// Replicated, but not applied here yet: the outcome is unknown.
	res := applyResult{seq: seq, outs: make([]campaign.ReportOutcome, len(ev.Reports))}
	for i := range res.outs {
		res.outs[i].Replication = campaign.Replicated
	}
	return res
}

// publish publishes one event, deduplicated by id, and returns its
// stream sequence. While the stream does not answer (streamUnreachable:
// a partition, a cluster without quorum) it does not try: the caller
// queues the event without waiting for the timeout again.
func (n *Node) publish(ctx context.Context, id string, data []byte) (uint64, error) {
	if n.streamUnreachable() && n.isReady() && n.nc.IsConnected() {
		return 0, fmt.Errorf("%w: the stream does not answer", errUnreachable)
	}
	return n.publishNow(ctx, id, data)
}

// publishNow is publish even while the stream is taken for unreachable:
// the outbox loop's probe.
func (n *Node) publishNow(ctx context.Context, id string, data []byte) (uint64, error) {
	if n.ctx.Err() != nil || !n.isReady() || !n.nc.IsConnected() {
		return 0, errUnreachable
	}
	pctx, cancel := context.WithTimeout(ctx, n.opts.PublishTimeout)
	defer cancel()
	h, err := n.sign.header(n.opts.subject(), id, data)
	if err != nil {
		return 0, err
	}
	ack, err := n.js.PublishMsg(pctx, &nats.Msg{Subject: n.opts.subject(), Header: h, Data: data}, jetstream.WithMsgID(id))
	if err != nil {
		if ctx.Err() == nil && n.ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) ||
			errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout)) {
			n.publishFailed()
		}
		return 0, fmt.Errorf("fleet: publish: %w", err)
	}
	n.mu.Lock()
	n.published++
	n.mu.Unlock()
	n.publishAcked()
	return ack.Sequence, nil
}

// outboxLoop publishes queued events, oldest first, whenever NATS is
// reachable.
func (n *Node) outboxLoop() {
	defer n.wg.Done()
	for n.sleep(500 * time.Millisecond) {
		if !n.isReady() || !n.nc.IsConnected() {
			continue
		}
		if n.streamUnreachable() {
			items, _, err := n.st.OutboxList(n.ctx, 1)
			if err == nil && len(items) == 0 {
				// Nothing to probe with: a query started after the
				// failed publish that finds a leader ends the spell.
				n.streamState(n.ctx) // asks in the background
				if at := n.pubDownAt.Load(); at != 0 && n.streamOK.Load() && n.streamAt.Load() > at {
					n.pubDownAt.CompareAndSwap(at, 0)
				}
				continue
			}
			// Otherwise the oldest queued event is the probe (drainOutbox).
		}
		if err := n.drainOutbox(); err != nil {
			n.log.Warn("fleet: outbox", "err", err)
		}
	}
}

// drainOutbox publishes the outbox until it is empty or a publish fails.
func (n *Node) drainOutbox() error {
	for n.ctx.Err() == nil {
		items, _, err := n.st.OutboxList(n.ctx, 256)
		if err != nil {
			return err
		}
		if len(items) == 0 {
			n.qlog.drained(n.log, time.Now())
			return nil
		}
		for _, it := range items {
			ev, err := decodeEvent(it.Data)
			if err != nil {
				n.log.Error("fleet: dropping a malformed queued event", "err", err)
			} else if _, err := n.publishNow(n.ctx, ev.ID, it.Data); err != nil {
				return err
			}
			if err := n.st.OutboxDelete(n.ctx, it.ID); err != nil {
				return err
			}
		}
	}
	return nil
}
