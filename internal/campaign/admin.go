package campaign

import (
	"context"
	"fmt"
	"time"

	"github.com/nddmilter/nddmilter/internal/store"
)

// Administrative changes: a campaign's state, its deletion, expiry.

// SetState changes a campaign's administrative state.
func (e *Ingester) SetState(ctx context.Context, id store.CampaignID, s store.State) error {
	if w := e.writer.Load(); w != nil {
		return w.w.SetState(ctx, id, s)
	}
	return e.setState(ctx, e.st, id, s)
}

func (e *Ingester) setState(ctx context.Context, st store.Store, id store.CampaignID, s store.State) error {
	err := st.SetState(ctx, id, s)
	e.invalidate(id)
	e.trust.forget() // its reporters' records changed
	return err
}

// Delete removes a campaign and every key pointing at it.
func (e *Ingester) Delete(ctx context.Context, id store.CampaignID) error {
	if w := e.writer.Load(); w != nil {
		return w.w.Delete(ctx, id)
	}
	return e.delete(ctx, e.st, id)
}

func (e *Ingester) delete(ctx context.Context, st store.Store, id store.CampaignID) error {
	err := st.Delete(ctx, id)
	e.invalidate(id)
	return err
}

// Expire deletes campaigns not seen nor reported for Options.Expiry and
// returns how many were deleted.
// In a fleet, the decision is published and applied by every node in
// stream order (0 deleted here).
func (e *Ingester) Expire(ctx context.Context) (int, error) {
	cutoff := e.now().Add(-e.opts.Expiry)
	if w := e.writer.Load(); w != nil {
		return 0, w.w.Expire(ctx, cutoff)
	}
	return e.expireBefore(ctx, e.st, cutoff)
}

// expireBefore deletes the campaigns of st last seen before cutoff.
func (e *Ingester) expireBefore(ctx context.Context, st store.Store, cutoff time.Time) (int, error) {
	n, err := st.Expire(ctx, cutoff)
	if e.cache != nil && n > 0 {
		e.cache.purge()
	}
	if err != nil {
		return n, fmt.Errorf("expire campaigns: %w", err)
	}
	return n, nil
}

// Allow marks campaign id allowed (never acted on) or, with allow false,
// active again, and returns its updated record. An unknown campaign gives
// an error wrapping store.ErrNotFound and changes nothing.
func (e *Ingester) Allow(ctx context.Context, id store.CampaignID, allow bool) (*store.Campaign, error) {
	if _, err := e.st.Get(ctx, id); err != nil {
		return nil, err // the store names the campaign
	}
	state := store.StateAllowed
	if !allow {
		state = store.StateActive
	}
	if err := e.SetState(ctx, id, state); err != nil {
		return nil, fmt.Errorf("set state of campaign %d: %w", id, err)
	}
	c, err := e.st.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return c, nil
}
