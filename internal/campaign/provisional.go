package campaign

import (
	"context"
	"fmt"

	"github.com/nddmilter/nddmilter/internal/pipeline"
)

// Provisional reports. A fleet node that takes a report while the
// fleet's stream is unreachable queues it: the report reaches the store
// only once the stream orders it (internal/fleet). Until then the host
// that took it is protected by a Provisional: Check consults it for a
// message the store has no campaign of, and acts on its verdict, marked
// Provisional, without recording a hit (the store is unchanged, so the
// fleet's state hashes still agree).

// Provisional gives the verdict of the reports not yet in the store.
type Provisional interface {
	// Verdict is the verdict of m against the provisional reports; ok
	// false when none matches.
	Verdict(ctx context.Context, m *pipeline.Message, o CheckOptions) (v Verdict, ok bool)
}

type provisionalBox struct{ p Provisional }

// SetProvisional makes p the provisional reports Check consults (nil:
// none).
func (e *Checker) SetProvisional(p Provisional) {
	if p == nil {
		e.prov.Store(nil)
		return
	}
	e.prov.Store(&provisionalBox{p})
}

// DecideSigned is the verdict of an already-signed message, without
// recording it (Evaluate of a pipeline.Message).
func (e *Checker) DecideSigned(ctx context.Context, m *pipeline.Message, o CheckOptions) (Verdict, error) {
	return e.decide(ctx, m, false, o)
}

// provisional replaces v, a verdict without a campaign, by the
// provisional reports' verdict when one matches.
func (e *Checker) provisional(ctx context.Context, m *pipeline.Message, o CheckOptions, v Verdict) Verdict {
	b := e.prov.Load()
	if b == nil || v.Campaign != 0 || v.Skip != nil || v.Failed != "" {
		return v
	}
	pv, ok := b.p.Verdict(ctx, m, o)
	if !ok {
		return v
	}
	// Its campaign is the provisional store's, not the fleet's: not
	// named, and no hit is counted for it.
	pv.Campaign, pv.OtherCampaigns = 0, nil
	pv.Provisional = true
	pv.Rule = fmt.Sprintf("%s: provisional, like a report this host took while the fleet's stream was unreachable (not yet in the fleet's campaigns; score %.2f)", pv.Action, pv.Score)
	return pv
}
