package campaign

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/pipeline"
	"github.com/nddmilter/nddmilter/internal/shortsig"
	"github.com/nddmilter/nddmilter/internal/store"
)

// Allowed and revoked campaigns among several matches (docs/POLICY.md,
// docs/SECURITY.md).
//
// A campaign an administrator allowed, or one revoked by not-spam reports,
// is never acted on: its mailing is legitimate. That protects the mailing,
// never a message that also matches a campaign to act on: a spam's text
// followed or preceded by an allowed newsletter's text matches both, and
// the allow must not accept it. When a message matches an allowed or
// revoked campaign X and active campaigns of which the strongest acts
// (tag or more), X's accept stands only when the message is a near-copy
// of X as a whole:
//
//  1. on every whole-message measure available for the message and X —
//     the estimated ANDD cosine of its whole sketch with X's closest kept
//     sketch, the q-gram similarity (the share of distinct text shared,
//     position-blind) with X's closest q-gram sketch — it reaches the
//     near-copy bar (nearCopyBars), so close that the rest of the message
//     cannot be a match of another text on the same measure; when neither
//     is available (short messages), it matched X through the short
//     "all" key (its whole content) or through every I-Match bag it has;
//  2. it is at least as close to X as to every active campaign that
//     would act on it: the mean of those measures (over the ones available
//     for both campaigns) is no smaller for X;
//  3. no such campaign matched its lead (subject and leading text) that X
//     did not match too: a message that begins as a spam is not a copy of
//     the allowed mailing.
//
// Otherwise the strongest action among the active campaigns stands, and
// the verdict says which allowed or revoked campaign was set aside and
// why (Verdict.Exempt).

// measure is one whole-message similarity, unset when not measured.
type measure struct {
	v  float64
	ok bool
}

// Exempt is how a message that matched both an allowed or revoked
// campaign and an active campaign to act on was decided.
type Exempt struct {
	// Campaign is the allowed or revoked campaign, State its state.
	Campaign store.CampaignID `json:"campaign"`
	State    store.State      `json:"state"`
	// Acting is the strongest active campaign, the one whose action
	// stands when Followed is false.
	Acting       store.CampaignID `json:"acting"`
	ActingAction action.Action    `json:"acting_action"`
	// Followed is true when the message is a near-copy of Campaign as a
	// whole: the verdict is Campaign's accept.
	Followed bool `json:"followed"`
	// Why is the condition that held (Followed) or the first that failed,
	// in words.
	Why string `json:"why"`
}

// exempt says whether c is never acted on.
func exempt(c *candidate) bool {
	s := c.rec.rec.State
	return s == store.StateAllowed || s == store.StateRevoked
}

// stronger orders candidates as the verdict always has: higher p, then
// more evidence.
func stronger(a, b *candidate) bool {
	return a.decision.P > b.decision.P ||
		(a.decision.P == b.decision.P && len(a.evidence) > len(b.evidence))
}

// choose picks the verdict's campaign among the matched ones (each
// decided on its own evidence): the strongest active campaign, pooled with
// its near-duplicates (pool.go), unless an allowed or revoked campaign
// prevails under the rule above. Exempt is set when both kinds matched
// and the active one acts.
func (e *Checker) choose(ctx context.Context, m *pipeline.Message, matched []*candidate) (*candidate, *Exempt) {
	var act, held *candidate
	var exempts []*candidate
	for _, c := range matched {
		if exempt(c) {
			exempts = append(exempts, c)
			if held == nil || stronger(c, held) {
				held = c
			}
		} else if act == nil || stronger(c, act) {
			act = c
		}
	}
	if act != nil {
		act = e.pool(ctx, act, matched)
	}
	switch {
	case act == nil:
		return held, nil
	case held == nil:
		return act, nil
	case act.decision.Action == action.Accept:
		// Accepted either way: the strongest match explains it.
		if stronger(held, act) {
			return held, nil
		}
		return act, nil
	}
	var acting []*candidate
	for _, c := range matched {
		if !exempt(c) && c.decision.Action > action.Accept {
			acting = append(acting, c)
		}
	}
	slices.SortStableFunc(exempts, func(a, b *candidate) int {
		switch {
		case stronger(a, b):
			return -1
		case stronger(b, a):
			return 1
		}
		return 0
	})
	var first *Exempt
	for _, x := range exempts {
		why, ok := e.nearCopy(m, x, acting)
		ex := &Exempt{Campaign: x.id, State: x.rec.rec.State, Acting: act.id, ActingAction: act.decision.Action, Followed: ok, Why: why}
		if ok {
			return x, ex
		}
		if first == nil {
			first = ex
		}
	}
	return act, first
}

// nearCopyBars are the whole-message similarities a message needs with an
// allowed or revoked campaign to be a near-copy of it as a whole: for ANDD
// max(t, √(1−t²)) with t the model's threshold (a message that close to
// the campaign's sketch is farther than t from any text orthogonal to it:
// the rest of it cannot be an ANDD match of another text), for q-grams
// max(q, 1−q) with q the q-gram threshold (the distinct text it does not
// share with the campaign is below q of it).
func (e *Checker) nearCopyBars() (andd, qg float64) {
	return max(e.threshold, math.Sqrt(max(0, 1-e.threshold*e.threshold))), max(e.qthresh, 1-e.qthresh)
}

// nearCopy tells whether m is a near-copy of the exempt campaign x as a
// whole, held against the active campaigns that would act on it, and says
// why in words (the conditions of the rule above).
func (e *Checker) nearCopy(m *pipeline.Message, x *candidate, acting []*candidate) (string, bool) {
	aBar, qBar := e.nearCopyBars()
	var held []string
	for _, ms := range []struct {
		name string
		v    measure
		bar  float64
	}{{"ANDD", x.wholeANDD, aBar}, {"q-grams", x.wholeQ, qBar}} {
		if !ms.v.ok {
			continue
		}
		if ms.v.v < ms.bar {
			return fmt.Sprintf("it is not a near-copy of campaign %d as a whole (%s %.3f < %.3f)", x.id, ms.name, ms.v.v, ms.bar), false
		}
		held = append(held, fmt.Sprintf("%s %.3f ≥ %.3f", ms.name, ms.v.v, ms.bar))
	}
	if len(held) == 0 {
		switch {
		case slices.ContainsFunc(x.evidence, func(ev Evidence) bool {
			return ev.Family == FamilyShort && ev.Kind == shortsig.KindAll.String()
		}):
			held = append(held, "its whole content (short-message key all)")
		case len(m.IMatch) > 0 && countFamily(x.evidence, FamilyIMatch) >= len(m.IMatch):
			held = append(held, fmt.Sprintf("all its %d I-Match signatures", len(m.IMatch)))
		default:
			return fmt.Sprintf("it is not a near-copy of campaign %d as a whole (no whole-message similarity, not every I-Match signature)", x.id), false
		}
	}
	for _, a := range acting {
		if mx, ma, ok := meanCloseness(x, a); ok && ma > mx {
			return fmt.Sprintf("it is closer to campaign %d than to campaign %d (mean whole-message similarity %.3f > %.3f)", a.id, x.id, ma, mx), false
		}
	}
	if !hasLead(x) {
		for _, a := range acting {
			if hasLead(a) {
				return fmt.Sprintf("it begins as campaign %d (lead key), not as campaign %d", a.id, x.id), false
			}
		}
	}
	return fmt.Sprintf("it is a near-copy of campaign %d as a whole (%s), at least as close as to any campaign to act on", x.id, strings.Join(held, ", ")), true
}

// meanCloseness returns the means of the whole-message similarities of
// the message to x and to a over the measures available for both; false
// when there is none.
func meanCloseness(x, a *candidate) (mx, ma float64, ok bool) {
	n := 0
	for _, p := range [][2]measure{{x.wholeANDD, a.wholeANDD}, {x.wholeQ, a.wholeQ}} {
		if p[0].ok && p[1].ok {
			mx += p[0].v
			ma += p[1].v
			n++
		}
	}
	if n == 0 {
		return 0, 0, false
	}
	return mx / float64(n), ma / float64(n), true
}

// hasLead says whether c matched the message's lead key.
func hasLead(c *candidate) bool {
	return slices.ContainsFunc(c.evidence, func(ev Evidence) bool {
		return ev.Family == FamilyShort && ev.Kind == shortsig.KindLead.String()
	})
}

// countFamily counts the evidence of a family.
func countFamily(ev []Evidence, family string) int {
	n := 0
	for _, e := range ev {
		if e.Family == family {
			n++
		}
	}
	return n
}

// stateWords describes an exempt state for a verdict's rule.
func stateWords(s store.State) string {
	if s == store.StateRevoked {
		return "revoked by not-spam reports"
	}
	return "allowed by an administrator"
}

// String explains the exemption for the verdict's rule.
func (x *Exempt) String() string {
	if x.Followed {
		return fmt.Sprintf("campaign %d's %s set aside: %s", x.Acting, x.ActingAction, x.Why)
	}
	covers := "the allow covers"
	if x.State == store.StateRevoked {
		covers = "the revocation covers"
	}
	return fmt.Sprintf("campaign %d is %s but %s its mailing only, and %s: campaign %d's %s stands",
		x.Campaign, stateWords(x.State), covers, x.Why, x.Acting, x.ActingAction)
}
