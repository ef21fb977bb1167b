package campaign

import (
	"context"
	"fmt"

	"github.com/nddmilter/nddmilter/internal/store"
)

// reporterLister is the part of a store that lists a campaign's
// reporters (*store.Badger); stores without it list none.
type reporterLister interface {
	Reporters(ctx context.Context, id store.CampaignID, limit int) ([]store.Reporter, error)
}

// Reporters lists the distinct reporters of campaign id as the store keeps
// them (hashes of their ids, store.ReporterHash), at most limit (0: all).
func (e *Engine) Reporters(ctx context.Context, id CampaignID, limit int) ([]store.Reporter, error) {
	rl, ok := e.st.(reporterLister)
	if !ok {
		return nil, nil
	}
	rs, err := rl.Reporters(ctx, id, limit)
	if err != nil {
		return nil, fmt.Errorf("campaign %d: %w", id, err)
	}
	return rs, nil
}
