package campaign

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nddmilter/nddmilter/internal/store"
)

// Reader is the read model of the campaigns: listings, one campaign's
// record, series and reporters, the "now" view, the false-positive watch
// and the store's counts, read from the store's indexes and counters (not
// the Checker's cache), for the HTTP API, the dashboard and the command
// line. It never writes. It is safe for concurrent use.
type Reader struct {
	st        store.Store
	senders   store.SenderStore    // nil when the store keeps no sender domains
	reporters store.ReporterLister // nil when the store lists no reporters
	trust     *trustBook           // nil when reporter trust is off
	policy    Policy
	bags      int // I-Match bags of an exact copy (ExactCopy)
	now       func() time.Time
	log       *slog.Logger
}

// Policy returns the effective policy (defaults filled in): what
// ExactCopy and a campaign's reputation are decided with.
func (r *Reader) Policy() Policy { return r.policy }

// List returns the page of campaigns q selects, read from the store's
// indexes (not the engine's cache): its cost does not grow with the
// store.
func (r *Reader) List(ctx context.Context, q store.Query) ([]store.Campaign, error) {
	cs, err := r.st.List(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list campaigns: %w", err)
	}
	return cs, nil
}

// Get returns the current record of campaign id, read from the store (not
// the engine's cache). An unknown campaign gives an error wrapping
// ErrNotFound that names it.
func (r *Reader) Get(ctx context.Context, id store.CampaignID) (*store.Campaign, error) {
	c, err := r.st.Get(ctx, id)
	if err != nil {
		return nil, err // the store names the campaign
	}
	return c, nil
}

// Timeline returns the daily counts of campaign id, oldest first.
func (r *Reader) Timeline(ctx context.Context, id store.CampaignID) ([]store.DayCount, error) {
	days, err := r.st.Timeline(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("campaign %d timeline: %w", id, err)
	}
	return days, nil
}

// ExactCopy is what the policy would do with an exact copy of campaign c
// (every I-Match bag matched), with its explanation.
func (r *Reader) ExactCopy(c *store.Campaign) Decision {
	ev := make([]Evidence, r.bags) // bag 0 is the original lexicon
	for i := range ev {
		ev[i] = Evidence{Family: FamilyIMatch, Bag: i, Similarity: 1}
	}
	return r.policy.Decide(c, ev, 1)
}

// Series returns campaign id's hourly series over the hours the store
// keeps (7 days by default), one entry per hour from its first kept hour
// to the current one (hours without activity are zero), oldest first.
func (r *Reader) Series(ctx context.Context, id store.CampaignID) ([]store.HourCount, error) {
	now := r.now()
	hs, err := r.st.Hours(ctx, id, time.Time{})
	if err != nil {
		return nil, fmt.Errorf("campaign %d series: %w", id, err)
	}
	if len(hs) == 0 {
		return nil, nil
	}
	return FillHours(hs, hs[0].Hour, now), nil
}

// Stats returns the store's counts (kept incrementally: a few reads).
func (r *Reader) Stats(ctx context.Context) (store.Stats, error) {
	s, err := r.st.Stats(ctx)
	if err != nil {
		return store.Stats{}, fmt.Errorf("store stats: %w", err)
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
	store.Campaign
	// Series holds one entry per hour of NowQuery.Hours, oldest first.
	Series []store.HourCount
}

// NowView is what is going on: campaigns ranked by recent volume with a
// sparkline each, the store-wide totals per hour and the store's size.
type NowView struct {
	At        time.Time // the current hour ends the series
	Sort      string
	Campaigns []Ranked
	// Totals holds one entry per hour of NowQuery.Hours, oldest first:
	// messages checked and matched, actions, reports.
	Totals []store.HourTotal
	Stats  store.Stats
}

// MaxNowHours bounds NowQuery.Hours.
const MaxNowHours = 168

// Now returns the "now" view. Every part is read from the store's
// indexes, series and counters: its cost grows with the page, not with
// the store.
func (r *Reader) Now(ctx context.Context, q NowQuery) (NowView, error) {
	switch q.Sort {
	case "":
		q.Sort = store.SortHour
	case store.SortHour, store.SortDay:
	default:
		return NowView{}, fmt.Errorf("now view: unknown sort %q (want hour or day)", q.Sort)
	}
	if q.Hours <= 0 {
		q.Hours = 24
	}
	q.Hours = min(q.Hours, MaxNowHours)
	now := r.now().UTC()
	from := now.Truncate(time.Hour).Add(-time.Duration(q.Hours-1) * time.Hour)
	v := NowView{At: now, Sort: q.Sort}
	cs, err := r.List(ctx, store.Query{Sort: q.Sort, Limit: q.Limit, Offset: q.Offset})
	if err != nil {
		return NowView{}, fmt.Errorf("now view: %w", err)
	}
	v.Campaigns = make([]Ranked, 0, len(cs))
	for _, c := range cs {
		hs, err := r.st.Hours(ctx, c.ID, from)
		if err != nil {
			continue // deleted or merged since the listing
		}
		v.Campaigns = append(v.Campaigns, Ranked{Campaign: c, Series: FillHours(hs, from, now)})
	}
	ts, err := r.st.Totals(ctx, from)
	if err != nil {
		return NowView{}, fmt.Errorf("now view: %w", err)
	}
	v.Totals = fillTotals(ts, from, now)
	if v.Stats, err = r.Stats(ctx); err != nil {
		return NowView{}, fmt.Errorf("now view: %w", err)
	}
	return v, nil
}

// FillHours returns hs (sorted by hour) with one entry for every hour from
// from's to to's, zero where hs has none.
func FillHours(hs []store.HourCount, from, to time.Time) []store.HourCount {
	return fill(hs, from, to, func(c store.HourCount) time.Time { return c.Hour }, func(t time.Time) store.HourCount { return store.HourCount{Hour: t} })
}

func fillTotals(ts []store.HourTotal, from, to time.Time) []store.HourTotal {
	return fill(ts, from, to, func(t store.HourTotal) time.Time { return t.Hour }, func(t time.Time) store.HourTotal { return store.HourTotal{Hour: t} })
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
