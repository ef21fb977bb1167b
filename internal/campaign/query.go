package campaign

import (
	"context"
	"fmt"
	"time"

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
	// HourCount is one hour of a campaign's hourly series.
	HourCount = store.HourCount
	// HourTotal is one hour of the store-wide totals.
	HourTotal = store.HourTotal
	// Stats summarizes the store.
	Stats = store.Stats
)

// Listing orders of Query.Sort (see store.Query).
const (
	SortRecent  = store.SortRecent
	SortVolume  = store.SortVolume
	SortReports = store.SortReports
	SortHour    = store.SortHour
	SortDay     = store.SortDay
	SortHam     = store.SortHam
)

// Listing bounds of Query.Limit.
const (
	DefaultListLimit = store.DefaultListLimit
	MaxListLimit     = store.MaxListLimit
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

// List returns the page of campaigns q selects, read from the store's
// indexes (not the engine's cache): its cost does not grow with the
// store.
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

// Series returns campaign id's hourly series over the hours the store
// keeps (7 days by default), one entry per hour from its first kept hour
// to the current one (hours without activity are zero), oldest first.
func (e *Engine) Series(ctx context.Context, id CampaignID) ([]HourCount, error) {
	now := e.now()
	hs, err := e.st.Hours(ctx, id, time.Time{})
	if err != nil {
		return nil, fmt.Errorf("campaign %d series: %w", id, err)
	}
	if len(hs) == 0 {
		return nil, nil
	}
	return FillHours(hs, hs[0].Hour, now), nil
}

// Stats returns the store's counts (kept incrementally: a few reads).
func (e *Engine) Stats(ctx context.Context) (Stats, error) {
	s, err := e.st.Stats(ctx)
	if err != nil {
		return Stats{}, fmt.Errorf("store stats: %w", err)
	}
	return s, nil
}

// NowQuery selects the "now" view.
type NowQuery struct {
	// Sort is SortHour (the default: matched messages in the current and
	// previous hour) or SortDay (the last 25 hours).
	Sort string
	// Limit and Offset page the ranking as in Query.
	Limit, Offset int
	// Hours is the length of the series (sparklines, totals), ending
	// with the current hour. Default 24, at most 168.
	Hours int
}

// Ranked is a campaign of the "now" view with its recent hourly series.
type Ranked struct {
	Campaign
	// Series holds one entry per hour of NowQuery.Hours, oldest first.
	Series []HourCount
}

// NowView is what is going on: campaigns ranked by recent volume with a
// sparkline each, the store-wide totals per hour and the store's size.
type NowView struct {
	At        time.Time // the current hour ends the series
	Sort      string
	Campaigns []Ranked
	// Totals holds one entry per hour of NowQuery.Hours, oldest first:
	// messages checked and matched, actions, reports.
	Totals []HourTotal
	Stats  Stats
}

// MaxNowHours bounds NowQuery.Hours.
const MaxNowHours = 168

// Now returns the "now" view. Every part is read from the store's
// indexes, series and counters: its cost grows with the page, not with
// the store.
func (e *Engine) Now(ctx context.Context, q NowQuery) (NowView, error) {
	switch q.Sort {
	case "":
		q.Sort = SortHour
	case SortHour, SortDay:
	default:
		return NowView{}, fmt.Errorf("now view: unknown sort %q (want hour or day)", q.Sort)
	}
	if q.Hours <= 0 {
		q.Hours = 24
	}
	q.Hours = min(q.Hours, MaxNowHours)
	now := e.now().UTC()
	from := now.Truncate(time.Hour).Add(-time.Duration(q.Hours-1) * time.Hour)
	v := NowView{At: now, Sort: q.Sort}
	cs, err := e.List(ctx, Query{Sort: q.Sort, Limit: q.Limit, Offset: q.Offset})
	if err != nil {
		return NowView{}, fmt.Errorf("now view: %w", err)
	}
	v.Campaigns = make([]Ranked, 0, len(cs))
	for _, c := range cs {
		hs, err := e.st.Hours(ctx, c.ID, from)
		if err != nil {
			continue // deleted or merged since the listing
		}
		v.Campaigns = append(v.Campaigns, Ranked{Campaign: c, Series: FillHours(hs, from, now)})
	}
	ts, err := e.st.Totals(ctx, from)
	if err != nil {
		return NowView{}, fmt.Errorf("now view: %w", err)
	}
	v.Totals = fillTotals(ts, from, now)
	if v.Stats, err = e.Stats(ctx); err != nil {
		return NowView{}, fmt.Errorf("now view: %w", err)
	}
	return v, nil
}

// FillHours returns hs (sorted by hour) with one entry for every hour from
// from's to to's, zero where hs has none.
func FillHours(hs []HourCount, from, to time.Time) []HourCount {
	return fill(hs, from, to, func(c HourCount) time.Time { return c.Hour }, func(t time.Time) HourCount { return HourCount{Hour: t} })
}

func fillTotals(ts []HourTotal, from, to time.Time) []HourTotal {
	return fill(ts, from, to, func(t HourTotal) time.Time { return t.Hour }, func(t time.Time) HourTotal { return HourTotal{Hour: t} })
}

func fill[T any](in []T, from, to time.Time, hour func(T) time.Time, zero func(time.Time) T) []T {
	from, to = from.UTC().Truncate(time.Hour), to.UTC().Truncate(time.Hour)
	if to.Before(from) {
		return nil
	}
	out := make([]T, 0, int(to.Sub(from)/time.Hour)+1)
	i := 0
	for h := from; !h.After(to); h = h.Add(time.Hour) {
		for i < len(in) && hour(in[i]).Before(h) {
			i++
		}
		if i < len(in) && hour(in[i]).Equal(h) {
			out = append(out, in[i])
			i++
		} else {
			out = append(out, zero(h))
		}
	}
	return out
}
