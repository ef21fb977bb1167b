package campaign

import (
	"context"
	"fmt"
	"time"

	"github.com/nddmilter/nddmilter/internal/store"
)

// Writes in a fleet: the Ingester's write target, chosen when the daemon
// wires the engine, and the explicit application of the fleet's
// replicated events to the local store.

// Writer takes the Ingester's writes in place of the local store: a fleet
// node (internal/fleet) publishes reports, administrative changes and
// expiry decisions as events on the fleet's stream, which every node
// applies, in stream order, through its Ingester's Apply methods. Checks
// still read the local store.
type Writer interface {
	// Report publishes reports (or queues them while the stream is
	// unreachable) and returns their outcomes; Replication says which.
	Report(ctx context.Context, reqs []ReportRequest) ([]ReportOutcome, error)
	SetState(ctx context.Context, id store.CampaignID, s store.State) error
	Delete(ctx context.Context, id store.CampaignID) error
	// Expire publishes the decision to expire campaigns last seen
	// before cutoff.
	Expire(ctx context.Context, cutoff time.Time) error
}

// Replication values of a ReportOutcome.
const (
	// Replicated: the report is in the fleet's replicated stream.
	Replicated = "replicated"
	// Queued: the stream was unreachable; the report waits in this
	// node's durable outbox and is published when the stream is back.
	Queued = "queued"
)

type writerBox struct{ w Writer }

// SetWriter makes the ingester hand its writes to w (nil: write the
// local store, the standalone default). The daemon chooses it when it
// wires the engine.
func (e *Ingester) SetWriter(w Writer) {
	if w == nil {
		e.writer.Store(nil)
		return
	}
	e.writer.Store(&writerBox{w})
}

// ApplyOptions name the replicated event an Apply method applies to the
// local store.
type ApplyOptions struct {
	// Seq is the event's stream sequence: the store records it as
	// applied in the same transactions as the event's changes, and the
	// campaigns the event creates get ids derived from it
	// (store.EventStore).
	Seq uint64
	// Time is the event's time, stored in place of the engine's clock.
	Time time.Time
	// Round is the round of a report event being applied (ApplyReports;
	// store.Round), whose Seq is the event's; nil for the other events.
	Round *store.Round
}

// eventStore returns the store as the event of o writes it.
func (e *Ingester) eventStore(o ApplyOptions) (*store.EventWriter, error) {
	if e.events == nil {
		return nil, fmt.Errorf("apply event %d: store %T cannot", o.Seq, e.st)
	}
	if o.Round != nil {
		return e.events.ForRound(o.Round), nil
	}
	return e.events.ForEvent(o.Seq), nil
}

// ApplyReports applies the reports of a replicated report event, one
// round of it (o.Round: the store commits a prefix of the reports; the
// caller matches the rest again in the next round). The reports are
// applied as their origin published them: their reporter ids were
// normalized and admitted there, and are not here.
func (e *Ingester) ApplyReports(ctx context.Context, o ApplyOptions, reqs []ReportRequest) ([]ReportOutcome, error) {
	w, err := e.eventStore(o)
	if err != nil {
		return nil, &BatchError{Index: 0, Err: err}
	}
	return e.write(ctx, target{st: w, batch: w, at: o.Time, round: o.Round}, reqs)
}

// ApplyState applies a replicated change of a campaign's state.
func (e *Ingester) ApplyState(ctx context.Context, o ApplyOptions, id store.CampaignID, s store.State) error {
	w, err := e.eventStore(o)
	if err != nil {
		return err
	}
	return e.setState(ctx, w, id, s)
}

// ApplyDelete applies a replicated deletion of a campaign.
func (e *Ingester) ApplyDelete(ctx context.Context, o ApplyOptions, id store.CampaignID) error {
	w, err := e.eventStore(o)
	if err != nil {
		return err
	}
	return e.delete(ctx, w, id)
}

// ApplyExpiry deletes the campaigns last seen before cutoff (a
// replicated expiry decision) and returns how many.
func (e *Ingester) ApplyExpiry(ctx context.Context, o ApplyOptions, cutoff time.Time) (int, error) {
	w, err := e.eventStore(o)
	if err != nil {
		return 0, err
	}
	return e.expireBefore(ctx, w, cutoff)
}

// ApplyHits adds hit deltas counted by the nodes of a fleet to the local
// store (store.Badger.ApplyHits).
func (e *Ingester) ApplyHits(ctx context.Context, o ApplyOptions, hits []store.HitDelta) error {
	w, err := e.eventStore(o)
	if err != nil {
		return fmt.Errorf("apply hits: %w", err)
	}
	err = w.ApplyHits(ctx, hits)
	for _, h := range hits {
		e.invalidate(h.Campaign)
	}
	return err
}
