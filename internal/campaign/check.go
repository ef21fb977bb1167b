package campaign

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/pipeline"
	"github.com/nddmilter/nddmilter/internal/shortsig"
	"github.com/nddmilter/nddmilter/internal/store"
)

// Checking: the decision on a message (the milter, the API's and the
// command line's checks).

// Checker decides what to do with a message: the pipeline signs it,
// match looks its keys up in the store and verifies the candidates, the
// policy decides, and a match is counted (a hit: the campaign's volume
// and expiry). It reads the store and never changes a campaign, but for
// those counters, which go to its HitCounter. It is safe for concurrent
// use.
type Checker struct {
	*core
	hits atomic.Pointer[hitsBox]        // where hits are counted (SetHitCounter; nil: the store)
	prov atomic.Pointer[provisionalBox] // a fleet node's queued reports (SetProvisional)
}

// HitCounter counts the checked messages that matched a campaign, in
// place of the store (a fleet node publishes them as aggregated events,
// internal/fleet).
type HitCounter interface {
	RecordHit(id store.CampaignID, action string, at time.Time)
}

type hitsBox struct{ h HitCounter }

// SetHitCounter makes the checker count its hits through h (nil: the
// local store, the standalone default). The daemon chooses it when it
// wires the engine.
func (e *Checker) SetHitCounter(h HitCounter) {
	if h == nil {
		e.hits.Store(nil)
		return
	}
	e.hits.Store(&hitsBox{h})
}

// Check decides what to do with a raw message and, when a campaign
// matched, counts the message and the action in the campaign's statistics
// (which refreshes it against expiry and feeds its volume).
func (e *Checker) Check(ctx context.Context, raw []byte) (Verdict, error) {
	return e.check(ctx, raw, true, CheckOptions{})
}

// CheckOptions adjust one Check.
type CheckOptions struct {
	// MaxAction caps the verdict's action, on top of the policy's
	// max_action: the milter passes the cap of the message's recipients
	// (milter.overrides), so that the verdict, its rule and the campaign's
	// counters all say what was done. Capping applies only when CapBy is
	// set.
	MaxAction action.Action
	// CapBy names what set MaxAction, for the verdict's rule (e.g.
	// "milter.overrides abuse@example.org").
	CapBy string
	// DeferRejects says that the MTA will defer (4xx) what the verdict
	// rejects (milter.reject_with: tempfail): the rule says so and the
	// campaign counts a "tempfail" instead of a "reject". The verdict's
	// action stays Reject.
	DeferRejects bool
}

// CheckWith is Check with per-message options.
func (e *Checker) CheckWith(ctx context.Context, raw []byte, o CheckOptions) (Verdict, error) {
	return e.check(ctx, raw, true, o)
}

// Evaluate is Check without counting the message: the same verdict, for
// dry runs (nddmilter check, evaluations) that must not change the
// campaigns' statistics.
func (e *Checker) Evaluate(ctx context.Context, raw []byte) (Verdict, error) {
	return e.check(ctx, raw, false, CheckOptions{})
}

// check is the path of every checked message: the pipeline makes the
// raw bytes evidence (pipeline.Sign), and decide looks it up in the store
// and applies the policy.
func (e *Checker) check(ctx context.Context, raw []byte, record bool, o CheckOptions) (Verdict, error) {
	m, err := e.pipe.Sign(ctx, raw)
	if err != nil {
		v := Verdict{Action: action.Accept, Failed: "sign"}
		v.Rule = v.Explain()
		return v, fmt.Errorf("check: %w", err)
	}
	return e.decide(ctx, m, record, o)
}

// decide is check after signing: lookup, verification, policy, and the
// campaign's statistics when record is set.
func (e *Checker) decide(ctx context.Context, m *pipeline.Message, record bool, o CheckOptions) (Verdict, error) {
	v, err := e.verdict(ctx, m, o)
	v.Rule = v.Explain()
	if err == nil && v.Campaign == 0 {
		if pv := e.provisional(ctx, m, o, v); pv.Provisional {
			return pv, nil
		}
	}
	if err != nil || !record {
		return v, err
	}
	if v.Campaign == 0 {
		// Counted in the store's hourly totals of checked messages (this
		// node's own, in a fleet too).
		if err := e.st.RecordCheck(ctx, v.Taken().String(), e.now()); err != nil {
			e.log.Warn("record check", "err", err)
		}
		if v.Taken() == action.Accept {
			if e.senders != nil {
				if d := SenderDomain(m.From); d != "" {
					e.senders.RecordHam(d)
				}
			}
			e.lists.record(m.ListID)
			if m.ListPost != "" && m.ListPost != m.ListID {
				// Counted under its posting address too: a reply sent
				// straight to the list's members names it (graymailOf).
				e.lists.record(m.ListPost)
			}
		}
		return v, nil
	}
	// The sender domains of a campaign's copies, and those held back as
	// graymail (this node's own, in memory until the hit flush): the
	// false-positive watch.
	if e.senders != nil {
		if d := SenderDomain(m.From); d != "" {
			e.senders.RecordSender(v.Campaign, d)
		}
		if v.Decision != nil && v.Decision.Graymail != nil {
			e.senders.RecordGraymail(v.Campaign)
		}
	}
	if b := e.hits.Load(); b != nil {
		b.h.RecordHit(v.Campaign, v.Taken().String(), e.now())
		return v, nil
	}
	if err := e.st.RecordHit(ctx, v.Campaign, v.Taken().String(), e.now()); err != nil {
		e.log.Warn("record hit", "campaign", v.Campaign, "err", err)
	}
	return v, nil
}

// verdict fills a verdict's fields (not its Rule).
func (e *Checker) verdict(ctx context.Context, m *pipeline.Message, o CheckOptions) (Verdict, error) {
	v := Verdict{Action: action.Accept, Warnings: m.Warnings}
	if m.Skip != pipeline.NoSkip {
		v.Skip = skipOf(m)
		return v, nil
	}
	res, err := e.match(ctx, m, false)
	if err != nil {
		v.Failed = "store"
		return v, fmt.Errorf("check: %w", err)
	}
	v.FooterOnly = res.footerOnly
	res.matched, v.SignedNoteOnly = dropSignedNote(m, res.matched)
	if len(res.matched) == 0 {
		return v, nil
	}
	gray := e.graymailOf(m)
	for _, c := range res.matched {
		c.gray = gray
		e.weigh(ctx, c)
		c.decision = e.policy.decide(c.rec.rec, c.evidence, c.inputs, gray, c.weights, e.threshold, e.th)
	}
	best, ex := e.choose(ctx, m, res.matched)
	v.Exempt = ex
	for _, c := range res.matched {
		if c != best {
			v.OtherCampaigns = append(v.OtherCampaigns, c.rec.rec.ID)
		}
	}
	best.hexKeys()
	best.decision.Rule = best.decision.Explain()
	v.Decision = &best.decision
	v.Action = best.decision.Action
	v.Campaign = best.rec.rec.ID
	v.Score = best.decision.P
	v.Evidence = best.evidence
	v.FooterNote = best.footerNote
	if o.CapBy != "" && v.Action > o.MaxAction {
		v.Cap = &Cap{From: v.Action, To: o.MaxAction, By: o.CapBy}
		v.Action = o.MaxAction
	}
	v.Deferred = o.DeferRejects && v.Action == action.Reject
	return v, nil
}

// CacheStats returns the hit and miss counts of the record cache (zero
// when the cache is disabled).
func (e *Checker) CacheStats() CacheStats {
	if e.cache == nil {
		return CacheStats{}
	}
	return CacheStats{Hits: e.cache.hits.Load(), Misses: e.cache.misses.Load()}
}

// signedNoteReporters is how many spam reporters a campaign needs before
// a signed note's body key alone matches it (pipeline.Message.SignedNote).
const signedNoteReporters = 2

// dropSignedNote takes out of matched the campaigns that m, a signed
// note, matches through its body key alone while they have fewer than
// signedNoteReporters spam reporters: such a key is mostly the author's
// signature, which all of the author's notes share, so one account's
// report of one note must not flag the others. It returns the campaigns
// kept and those taken out.
func dropSignedNote(m *pipeline.Message, matched []*candidate) (kept []*candidate, dropped []SignedNoteOnly) {
	if !m.SignedNote {
		return matched, nil
	}
	kept = matched[:0]
	for _, c := range matched {
		if n := c.rec.rec.SpamReporters; n < signedNoteReporters && bodyKeyOnly(c.evidence) {
			dropped = append(dropped, SignedNoteOnly{Campaign: c.rec.rec.ID, SpamReporters: n, Needed: signedNoteReporters})
			continue
		}
		kept = append(kept, c)
	}
	return kept, dropped
}

// bodyKeyOnly reports whether ev is short-message body keys only.
func bodyKeyOnly(ev []Evidence) bool {
	for _, e := range ev {
		if e.Family != FamilyShort || e.Kind != shortsig.KindBody.String() {
			return false
		}
	}
	return len(ev) > 0
}
