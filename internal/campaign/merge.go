package campaign

import (
	"cmp"
	"slices"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/shortsig"
	"github.com/nddmilter/nddmilter/internal/store"
)

// The merge rule (docs/design/merge.md).
//
// A report is one vote. Whatever it matched, it counts on exactly one
// campaign, the one it matched best, and it may extend that campaign (add
// its signature keys and sketch) or merge other campaigns into it only
// when nothing it matched contradicts that. Otherwise one account could
// craft a message that matches a spam campaign and a legitimate one (the
// bodies of both, one after the other) and make the spam's reporters
// count for the legitimate mail, or undo an administrator's decision.

// mergeCandidate is one campaign a report matched, as the merge rule sees
// it.
type mergeCandidate struct {
	ID    store.CampaignID
	State store.State
	// IMatch is the number of the report's I-Match signatures (bags) found
	// in the campaign.
	IMatch int
	// Short is the number of the report's short-message keys found in the
	// campaign, lead keys left out: like I-Match signatures, each hashes
	// the whole of a short message's content (a lead key, the subject and
	// leading text only, is weak evidence, as an ANDD-only match is).
	Short int
	// ANDD is the report's verified ANDD similarity to the campaign, -1
	// when it did not match through ANDD.
	ANDD float64
	// Sketches are the campaign's own stored sketches.
	Sketches []andd.Sketch
	// Report is the report's own sketch (nil without one).
	Report *andd.Sketch
}

// reportPlan is what a report does to the campaigns it matched.
type reportPlan struct {
	// Target is the campaign the report counts on; 0 when it matched
	// none (it then creates one, or joins one created earlier in the same
	// batch).
	Target store.CampaignID
	// Merge lists the other matched campaigns merged with Target.
	Merge []store.CampaignID
	// VoteOnly says that the report only counts on Target: it adds
	// neither its signature keys nor its sketch, and merges nothing.
	VoteOnly bool
	// Apart says that the report matched through ANDD only and starts a
	// campaign of its own (Target is 0) with its own signatures, leaving
	// the band keys of the campaigns it matched with them.
	Apart bool
	// Why says why the report is VoteOnly or Apart ("" otherwise).
	Why string
}

// Reasons a report only counts as a vote.
const (
	voteAmbiguous = "it also matched campaigns that may not be merged with it"
	voteANDDOnly  = "it matched through ANDD only"
	voteNotActive = "the campaign is allowed by an administrator or revoked"
)

// planReport applies the merge rule to the campaigns a report matched;
// threshold is the ANDD model's similarity threshold.
//
//   - Target: the campaign with the most matched exact keys (I-Match bags
//     and short-message keys other than lead keys), then the highest ANDD
//     similarity, then the oldest.
//   - A match is strong when it is through an exact key or a near copy
//     (nearCopyCosine with every sketch the campaign keeps). Only a
//     strong match extends Target (the report's keys and sketch) or
//     merges campaigns.
//   - Another matched campaign is merged with Target only when both are
//     active, both matches are strong, and the two are near-duplicates of
//     each other on their own stored evidence: every sketch of one is
//     within the ANDD threshold of every sketch of the other (within
//     nearCopyCosine when one match is a near copy, not I-Match), or
//     neither has a sketch. Campaigns merged together must all be
//     pairwise mergeable.
//   - When a matched campaign cannot be merged, the report is ambiguous:
//     it bridges campaigns that are not one campaign, and whatever it
//     added to Target could bridge them later. It only counts as a vote
//     on Target.
//   - A report whose match with Target is weak (ANDD only) is not added
//     to it: its I-Match signatures would give exact-match evidence,
//     backed by Target's reporters, to messages none of them reported (a
//     crafted report can carry another message's I-Match words and a
//     spam's heavily weighted words), and its sketch would let messages
//     ever further from the campaign join it. When it has I-Match
//     signatures of its own (apart is set: a spam report that has them),
//     it starts a campaign of its own: later copies of it join that one
//     through I-Match, so that the honest reports of a new spam are not
//     captured, as mere votes, by a campaign one account seeded with a
//     message near it. Otherwise (no I-Match signature, or a not-spam
//     report) it only counts as a vote on Target.
//   - A report on a campaign that is allowed or revoked only counts as a
//     vote: an administrator's decision or a revocation is never spread to
//     new signatures nor changed by a report.
func planReport(cands []mergeCandidate, threshold float64, apart bool) reportPlan {
	if len(cands) == 0 {
		return reportPlan{}
	}
	order := slices.Clone(cands)
	slices.SortStableFunc(order, func(a, b mergeCandidate) int {
		if c := cmp.Compare(b.exact(), a.exact()); c != 0 {
			return c
		}
		if c := cmp.Compare(b.ANDD, a.ANDD); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	target := order[0]
	plan := reportPlan{Target: target.ID}
	switch {
	case target.State != store.StateActive:
		plan.VoteOnly, plan.Why = true, voteNotActive
		return plan
	case target.exact() == 0 && target.nearCopy(threshold):
		// A near copy of every sketch the campaign keeps: joined as if
		// I-Match had matched.
	case target.exact() == 0 && apart:
		return reportPlan{Apart: true, Why: voteANDDOnly}
	case target.exact() == 0:
		plan.VoteOnly, plan.Why = true, voteANDDOnly
		return plan
	}
	group := []*mergeCandidate{&order[0]}
	for i := range order[1:] {
		c := &order[1+i]
		ok := true
		for _, g := range group {
			if !mayMerge(g, c, threshold) {
				ok = false
				break
			}
		}
		if !ok {
			return reportPlan{Target: target.ID, VoteOnly: true, Why: voteAmbiguous}
		}
		group = append(group, c)
		plan.Merge = append(plan.Merge, c.ID)
	}
	return plan
}

// nearCopyCosine is the ANDD similarity at which a match through ANDD
// alone counts as strongly as an I-Match match for joining and merging: a
// report must reach it with every sketch the campaign keeps, and two
// campaigns one of which the report matched through ANDD only must reach
// it on every pair of their sketches. A message made of two bodies does
// not reach it with either, nor does one whose I-Match words are
// another message's (the words ANDD weighs most are lexicon words), and
// a campaign's sketches cannot creep: each is that close to all others.
const nearCopyCosine = 0.9

// exact is the number of the report's exact keys found in c: I-Match
// signatures and short-message keys other than lead keys.
func (c *mergeCandidate) exact() int { return c.IMatch + c.Short }

// strong says whether the report's match with c may extend or merge c:
// through an exact key (I-Match, short), or a near copy of every sketch c
// keeps.
func (c *mergeCandidate) strong(threshold float64) bool {
	return c.exact() > 0 || c.nearCopy(threshold)
}

// nearCopy says whether the report matched c through ANDD and its sketch
// is within nearCopyCosine of every sketch c keeps.
func (c *mergeCandidate) nearCopy(threshold float64) bool {
	if len(c.Sketches) == 0 || c.ANDD < max(threshold, nearCopyCosine) || c.Report == nil {
		return false
	}
	for _, s := range c.Sketches {
		if andd.Cosine(*c.Report, s) < max(threshold, nearCopyCosine) {
			return false
		}
	}
	return true
}

// mayMerge says whether two campaigns a report matched may be merged (see
// planReport).
func mayMerge(a, b *mergeCandidate, threshold float64) bool {
	if a.State != store.StateActive || b.State != store.StateActive {
		return false
	}
	if !a.strong(threshold) || !b.strong(threshold) {
		return false
	}
	bar := threshold
	if a.exact() == 0 || b.exact() == 0 {
		bar = max(threshold, nearCopyCosine)
	}
	return nearDuplicates(a.Sketches, b.Sketches, bar)
}

// mergeCandidates describes the matched campaigns for planReport; report
// is the report's sketch (nil without one).
func mergeCandidates(matched []*candidate, report *andd.Sketch) []mergeCandidate {
	out := make([]mergeCandidate, 0, len(matched))
	for _, c := range matched {
		m := mergeCandidate{ID: c.rec.rec.ID, State: c.rec.rec.State, ANDD: -1, Sketches: c.rec.sketches, Report: report}
		for _, ev := range c.evidence {
			switch ev.Family {
			case FamilyIMatch:
				m.IMatch++
			case FamilyANDD:
				m.ANDD = max(m.ANDD, ev.Similarity)
			case FamilyShort:
				if ev.Kind != shortsig.KindLead.String() {
					m.Short++
				}
			}
		}
		out = append(out, m)
	}
	return out
}

// applyPlan makes the store input of a prepared report follow its plan:
// the store joins plan.Target, merges only plan.Merge, and leaves keys
// owned by other campaigns with their owner (store.ReportInput.Vetted).
func (e *Ingester) applyPlan(p *preparedReport, plan reportPlan, matched []*candidate) {
	p.in.Vetted, p.in.Target, p.in.MayMerge = true, plan.Target, plan.Merge
	p.plan = plan
	switch {
	case plan.Apart:
		// The band keys and lead keys that found the campaigns it matched
		// stay theirs, so that the store does not join one of them.
		owned := map[string]bool{}
		for _, c := range matched {
			for _, k := range c.bandKeys {
				owned[string(k)] = true
			}
			for _, k := range c.qKeys {
				owned[string(k)] = true
			}
			for i, ev := range c.evidence {
				if ev.Family == FamilyShort {
					owned[string(c.evKeys[i])] = true
				}
			}
		}
		keys := p.in.Keys[:0:0]
		nIM := 0
		for i, k := range p.in.Keys {
			if owned[string(k)] {
				continue
			}
			keys = append(keys, k)
			if i < p.nIM {
				nIM++
			}
		}
		p.in.Keys, p.nIM = keys, nIM
	case plan.VoteOnly:
		p.in.Keys, p.in.Sketch, p.in.MoreSketches = nil, nil, nil
		p.in.Create, p.in.Index = false, false
		p.nIM = 0
	}
}
