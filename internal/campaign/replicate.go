package campaign

import (
	"context"
	"fmt"
	"time"

	"github.com/nddmilter/nddmilter/internal/store"
)

// Replicator takes the engine's writes in a fleet (internal/fleet): in
// place of writing the local store, the engine hands reports,
// administrative changes, expiry and hits to it, and it publishes them as
// events that every node applies, in stream order, through the engine
// under a context made by Applying. Checks still read the local store.
type Replicator interface {
	// Report publishes reports (or queues them while the stream is
	// unreachable) and returns their outcomes; Replication says which.
	Report(ctx context.Context, reqs []ReportRequest) ([]ReportOutcome, error)
	SetState(ctx context.Context, id store.CampaignID, s store.State) error
	Delete(ctx context.Context, id store.CampaignID) error
	// Expire publishes the decision to expire campaigns last seen
	// before cutoff.
	Expire(ctx context.Context, cutoff time.Time) error
	// RecordHit counts a matched message; hits are published as
	// aggregated deltas.
	RecordHit(id store.CampaignID, action string, at time.Time)
}

// Replication values of a ReportOutcome.
const (
	// Replicated: the report is in the fleet's replicated stream.
	Replicated = "replicated"
	// Queued: the stream was unreachable; the report waits in this
	// node's durable outbox and is published when the stream is back.
	Queued = "queued"
)

type replicatorBox struct{ r Replicator }

// SetReplicator makes the engine hand its writes to r (nil: write the
// local store, the standalone default).
func (e *Engine) SetReplicator(r Replicator) {
	if r == nil {
		e.repl.Store(nil)
		return
	}
	e.repl.Store(&replicatorBox{r})
}

type applyingKey struct{}

// Applying returns a context under which the engine applies a replicated
// event to the local store instead of handing it to the replicator: at
// (the event's time) replaces the engine's clock for what is stored.
// Combine it with store.WithApplied.
func Applying(ctx context.Context, at time.Time) context.Context {
	return context.WithValue(ctx, applyingKey{}, at)
}

func applyingAt(ctx context.Context) (time.Time, bool) {
	at, ok := ctx.Value(applyingKey{}).(time.Time)
	return at, ok
}

// replicator returns the replicator writes go to under ctx (nil: the
// local store).
func (e *Engine) replicator(ctx context.Context) Replicator {
	b := e.repl.Load()
	if b == nil {
		return nil
	}
	if _, ok := applyingAt(ctx); ok {
		return nil
	}
	return b.r
}

// nowFor is the time stored for a write under ctx: the event's when
// applying one, else the engine's clock.
func (e *Engine) nowFor(ctx context.Context) time.Time {
	if at, ok := applyingAt(ctx); ok {
		return at
	}
	return e.now()
}

// ApplyHits adds hit deltas counted by the nodes of a fleet to the local
// store (store.Badger.ApplyHits).
func (e *Engine) ApplyHits(ctx context.Context, hits []store.HitDelta) error {
	hs, ok := e.st.(interface {
		ApplyHits(context.Context, []store.HitDelta) error
	})
	if !ok {
		return fmt.Errorf("apply hits: store %T cannot", e.st)
	}
	err := hs.ApplyHits(ctx, hits)
	for _, h := range hits {
		e.invalidate(h.Campaign)
	}
	return err
}

// ExpireBefore deletes campaigns last seen before cutoff (a replicated
// expiry decision).
func (e *Engine) ExpireBefore(ctx context.Context, cutoff time.Time) (int, error) {
	n, err := e.st.Expire(ctx, cutoff)
	if e.cache != nil && n > 0 {
		e.cache.purge()
	}
	if err != nil {
		return n, fmt.Errorf("expire campaigns: %w", err)
	}
	return n, nil
}
