package campaign

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/nddmilter/nddmilter/internal/store"
)

// Reporter trust (docs/POLICY.md, "Reporter trust").
//
// A spam reporter's weight follows its record: the campaigns it reported
// as spam that were later allowed by an administrator or revoked by
// not-spam reports contradict it; those that many accounts confirmed
// (Policy.ConfirmedReporters spam reporters, no not-spam reporter) agree
// with it. Its weight
//
//	w = (k + agreed) / (k + agreed + contradicted)
//	  × (1 + (TrustMax − 1) × agreed / (agreed + k))
//
// with k = Policy.TrustPrior is 1 without a record, falls towards 0 with
// contradictions and rises towards TrustMax with agreement. Each spam
// reporter then counts its weight in the reputation's log-odds instead of
// 1. The guards that count accounts (reject_min_reporters, one reporter
// never above tag, graymail_reporters, confirmed_reporters) still count
// accounts: a trusted account is still one account. The record is read
// from the store's index of campaigns by reporter, the same on every node
// of a fleet, and kept a minute.

// trustLimit is the number of a campaign's spam reporters weighed by
// their records; a campaign with more is decided on its account count.
const trustLimit = 32

// trustTTL is how long a reporter's weight is kept before its record is
// read again.
const trustTTL = time.Minute

// trustCacheSize bounds the weights kept; the cache is emptied when full.
const trustCacheSize = 1 << 16

// TrustRecord is a spam reporter's record and the weight it gives.
// Deciding a campaign, its reporters' records leave that campaign out:
// a campaign's own confirmation is no evidence for it.
type TrustRecord struct {
	// Judged is the number of its latest campaigns read (at most
	// Policy.TrustHistory) that it reported as spam.
	Judged int `json:"judged"`
	// Agreed are those confirmed by other accounts; Contradicted those
	// allowed or revoked since.
	Agreed       int     `json:"agreed"`
	Contradicted int     `json:"contradicted"`
	Weight       float64 `json:"weight"`
	// judged are the campaigns agreed (true) or contradicted (false).
	judged map[store.CampaignID]bool
}

// without returns the weight of r without campaigns ids in it.
func (p *Policy) without(r TrustRecord, ids []store.CampaignID) float64 {
	a, c := r.Agreed, r.Contradicted
	for _, id := range ids {
		agreed, ok := r.judged[id]
		switch {
		case !ok:
		case agreed:
			a--
		default:
			c--
		}
	}
	if a == r.Agreed && c == r.Contradicted {
		return r.Weight
	}
	return p.trustWeight(a, c)
}

// trustWeight is the weight of a record of agreed and contradicted
// campaigns.
func (p *Policy) trustWeight(agreed, contradicted int) float64 {
	k, a, c := p.TrustPrior, float64(agreed), float64(contradicted)
	return (k + a) / (k + a + c) * (1 + (p.TrustMax-1)*a/(a+k))
}

// record judges a reporter's campaigns.
func (p *Policy) trustRecord(cs []store.ReporterCampaign) TrustRecord {
	var r TrustRecord
	for _, c := range cs {
		if c.Kind != store.KindSpam {
			continue
		}
		r.Judged++
		var agreed bool
		switch {
		case c.State == store.StateAllowed || c.State == store.StateRevoked:
			r.Contradicted++
		case c.State == store.StateActive && c.SpamReporters >= int64(p.ConfirmedReporters) && c.HamReporters == 0:
			r.Agreed++
			agreed = true
		default:
			continue
		}
		if r.judged == nil {
			r.judged = map[store.CampaignID]bool{}
		}
		r.judged[c.ID] = agreed
	}
	r.Weight = p.trustWeight(r.Agreed, r.Contradicted)
	return r
}

// trustBook keeps the reporters' weights read from the store.
type trustBook struct {
	hist   store.ReporterHistory
	policy *Policy
	now    func() time.Time

	mu sync.Mutex
	m  map[uint64]trustEntry
}

type trustEntry struct {
	rec TrustRecord
	at  time.Time
}

// newTrustBook returns the weights over hist; nil when reporter trust is
// off or the store keeps no history.
func newTrustBook(hist store.ReporterHistory, p *Policy, now func() time.Time) *trustBook {
	if hist == nil || p.TrustHistory < 0 {
		return nil
	}
	return &trustBook{hist: hist, policy: p, now: now, m: map[uint64]trustEntry{}}
}

// record returns reporter h's record, read at most trustTTL ago.
func (t *trustBook) record(ctx context.Context, h uint64) (TrustRecord, error) {
	now := t.now()
	t.mu.Lock()
	e, ok := t.m[h]
	t.mu.Unlock()
	if ok && now.Sub(e.at) < trustTTL && !now.Before(e.at) {
		return e.rec, nil
	}
	cs, err := t.hist.ReporterCampaigns(ctx, h, t.policy.TrustHistory)
	if err != nil {
		return TrustRecord{}, fmt.Errorf("record of reporter %016x: %w", h, err)
	}
	rec := t.policy.trustRecord(cs)
	t.mu.Lock()
	if len(t.m) >= trustCacheSize {
		clear(t.m)
	}
	t.m[h] = trustEntry{rec, now}
	t.mu.Unlock()
	return rec, nil
}

// forget drops the kept records: a campaign's state changed, and with it
// its reporters' records.
func (t *trustBook) forget() {
	if t == nil {
		return
	}
	t.mu.Lock()
	clear(t.m)
	t.mu.Unlock()
}

// reporterWeights are the weights of a campaign's spam reporters, heaviest first.
type reporterWeights []float64

// weights returns the weights of the spam reporters hashes on their
// records without campaigns ids (those being decided), nil when they all
// weigh 1 or there are more than trustLimit.
func (t *trustBook) weights(ctx context.Context, ids []store.CampaignID, hashes []uint64) (reporterWeights, error) {
	if t == nil || len(hashes) == 0 || len(hashes) > trustLimit {
		return nil, nil
	}
	ws := make(reporterWeights, 0, len(hashes))
	plain := true
	for _, h := range hashes {
		r, err := t.record(ctx, h)
		if err != nil {
			return nil, err
		}
		w := t.policy.without(r, ids)
		ws = append(ws, w)
		plain = plain && math.Abs(w-1) < 1e-9
	}
	if plain {
		return nil, nil
	}
	slices.SortFunc(ws, func(a, b float64) int { return cmp.Compare(b, a) })
	return ws, nil
}

// spamHashes returns the hashes of campaign r's spam reporters, at most
// trustLimit+1 of them, read from the store once per cached record.
func (r *cachedRecord) spamHashes(ctx context.Context, rs store.ReporterLister) ([]uint64, error) {
	r.repMu.Lock()
	defer r.repMu.Unlock()
	if r.repLoaded {
		return r.spam, nil
	}
	reps, err := rs.Reporters(ctx, r.rec.ID, trustLimit+1)
	if err != nil {
		return nil, fmt.Errorf("reporters of campaign %d: %w", r.rec.ID, err)
	}
	for _, rep := range reps {
		if rep.Kind == store.KindSpam {
			r.spam = append(r.spam, rep.Hash)
		}
	}
	r.repLoaded = true
	return r.spam, nil
}

// weigh sets c's reporter weights; an error leaves every reporter at 1.
func (e *Checker) weigh(ctx context.Context, c *candidate) {
	if e.trust == nil || e.reporters == nil || c.rec.rec.SpamReporters > trustLimit || c.rec.rec.SpamReporters < 1 {
		return
	}
	hs, err := c.rec.spamHashes(ctx, e.reporters)
	if err == nil {
		c.weights, err = e.trust.weights(ctx, []store.CampaignID{c.rec.rec.ID}, hs)
	}
	if err != nil {
		e.log.Warn("check: reporter trust", "campaign", c.rec.rec.ID, "err", err)
	}
}

// sum is the weights' sum, n for nil weights of n reporters.
func (w reporterWeights) sum(n int64) float64 {
	if w == nil {
		return float64(n)
	}
	s := 0.0
	for _, x := range w {
		s += x
	}
	return s
}

// ReporterTrust returns the record of reporter hash (store.ReporterHash)
// and the weight it gives; ok is false when reporter trust is off.
func (r *Reader) ReporterTrust(ctx context.Context, hash uint64) (rec TrustRecord, ok bool, err error) {
	if r.trust == nil {
		return TrustRecord{}, false, nil
	}
	rec, err = r.trust.record(ctx, hash)
	return rec, err == nil, err
}
