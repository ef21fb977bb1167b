package campaign

import (
	"context"
	"fmt"

	"github.com/nddmilter/nddmilter/internal/store"
)

// The store's campaign types, under the engine's name: the engine's
// callers (the HTTP API, the command line) read and administer campaigns
// through the Engine and need not import internal/store. They are aliases,
// so values pass between the two packages unchanged.
type (
	// CampaignID identifies a campaign; IDs are never reused.
	CampaignID = store.CampaignID
	// Kind is the kind of a report: KindSpam or KindHam.
	Kind = store.Kind
	// State is the administrative state of a campaign.
	State = store.State
	// Campaign is the record of one campaign.
	Campaign = store.Campaign
	// Query selects campaigns for List: look-back, order and limit.
	Query = store.Query
	// DayCount is one day of a campaign's time series.
	DayCount = store.DayCount
)

// Report kinds.
const (
	KindSpam = store.KindSpam // the reporter says the message is junk
	KindHam  = store.KindHam  // the reporter says the message is not junk
)

// Campaign states.
const (
	StateActive  = store.StateActive  // acted on according to policy
	StateAllowed = store.StateAllowed // an administrator said: never act on it
	StateRevoked = store.StateRevoked // not-spam evidence outweighed spam reports
)

// ErrNotFound is wrapped by the errors about an unknown campaign (expired,
// deleted or merged into another); test with errors.Is.
var ErrNotFound = store.ErrNotFound

// List returns the campaigns q selects, read from the store (not the
// engine's cache).
func (e *Engine) List(ctx context.Context, q Query) ([]Campaign, error) {
	cs, err := e.st.List(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list campaigns: %w", err)
	}
	return cs, nil
}

// Get returns the current record of campaign id, read from the store (not
// the engine's cache). An unknown campaign gives an error wrapping
// ErrNotFound that names it.
func (e *Engine) Get(ctx context.Context, id CampaignID) (*Campaign, error) {
	c, err := e.st.Get(ctx, id)
	if err != nil {
		return nil, err // the store names the campaign
	}
	return c, nil
}

// Timeline returns the daily counts of campaign id, oldest first.
func (e *Engine) Timeline(ctx context.Context, id CampaignID) ([]DayCount, error) {
	days, err := e.st.Timeline(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("campaign %d timeline: %w", id, err)
	}
	return days, nil
}

// Allow marks campaign id allowed (never acted on) or, with allow false,
// active again, and returns its updated record. An unknown campaign gives
// an error wrapping ErrNotFound and changes nothing.
func (e *Engine) Allow(ctx context.Context, id CampaignID, allow bool) (*Campaign, error) {
	if _, err := e.Get(ctx, id); err != nil {
		return nil, err
	}
	state := StateAllowed
	if !allow {
		state = StateActive
	}
	if err := e.SetState(ctx, id, state); err != nil {
		return nil, fmt.Errorf("set state of campaign %d: %w", id, err)
	}
	c, err := e.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// ExactCopy is what the policy would do with an exact copy of campaign c
// (every I-Match bag matched), with its explanation.
func (e *Engine) ExactCopy(c *Campaign) Decision {
	ev := make([]Evidence, e.imatch.Options().K+1) // bag 0 is the original lexicon
	for i := range ev {
		ev[i] = Evidence{Family: FamilyIMatch, Bag: i, Similarity: 1}
	}
	return e.policy.Decide(c, ev, 1)
}
