package campaign

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/store"
)

// Pooling reporters at check time (docs/SECURITY.md, "What one reporter
// can do").
//
// The merge rule keeps a report that matched a campaign through ANDD only
// in a campaign of its own, so one spam run can end up in several
// campaigns, each with some of its reporters. A message that matches
// several of them is decided on the reporters of all of them, counted
// once each: the campaigns pooled are active and near-duplicates of each
// other on their own stored sketches (the pairwise test merges use), and
// a spam reporter is counted once whatever campaigns it reported in. A
// message can thus only gain spam reporters of campaigns it matches
// itself, each of which could decide it alone, and one account never
// counts twice.

// poolLimit is the number of reporters read per campaign for pooling: a
// campaign with more is decided on its own (it has plenty).
const poolLimit = 1024

// poolGroup returns the campaigns whose reporters a message that matched
// best (the verdict's campaign) and others counts: best first, then each
// other active campaign, by decreasing p, that is a near-duplicate (at
// the ANDD threshold) of every campaign already in the group on their own
// sketches. Nil when there is nothing to pool.
func poolGroup(best *candidate, matched []*candidate, threshold float64) []*candidate {
	if best.rec.rec.State != store.StateActive || len(matched) < 2 {
		return nil
	}
	others := slices.Clone(matched)
	slices.SortStableFunc(others, func(a, b *candidate) int {
		if c := cmp.Compare(b.decision.P, a.decision.P); c != 0 {
			return c
		}
		return cmp.Compare(a.rec.rec.ID, b.rec.rec.ID)
	})
	group := []*candidate{best}
	for _, c := range others {
		if c == best || c.rec.rec.State != store.StateActive {
			continue
		}
		ok := true
		for _, g := range group {
			if !nearDuplicates(g.rec.sketches, c.rec.sketches, threshold) {
				ok = false
				break
			}
		}
		if ok {
			group = append(group, c)
		}
	}
	if len(group) < 2 {
		return nil
	}
	return group
}

// nearDuplicates says whether two campaigns are near-duplicates on their
// own stored sketches: every sketch of one is within bar of every sketch
// of the other, or neither has a sketch.
func nearDuplicates(a, b []andd.Sketch, bar float64) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	for _, x := range a {
		for _, y := range b {
			if andd.Cosine(x, y) < bar {
				return false
			}
		}
	}
	return true
}

// poolReporters returns the hashes of campaign r's spam reporters, or
// over when it has more than poolLimit reporters, read from the store
// once per cached record.
func (r *cachedRecord) poolReporters(ctx context.Context, rs store.ReporterLister) (spam []uint64, over bool, err error) {
	r.poolMu.Lock()
	defer r.poolMu.Unlock()
	if r.poolLoaded {
		return r.pool, r.poolOver, nil
	}
	reps, err := rs.Reporters(ctx, r.rec.ID, poolLimit+1)
	if err != nil {
		return nil, false, fmt.Errorf("reporters of campaign %d: %w", r.rec.ID, err)
	}
	if r.poolOver = len(reps) > poolLimit; !r.poolOver {
		for _, rep := range reps {
			if rep.Kind == store.KindSpam {
				r.pool = append(r.pool, rep.Hash)
			}
		}
	}
	r.poolLoaded = true
	return r.pool, r.poolOver, nil
}

// pool decides a message that matched best (the verdict's campaign by
// its own reporters) and other campaigns on the distinct spam reporters
// of best's pool group (see poolGroup), when they are more than a
// campaign's own: each campaign of the group is decided on the message's
// evidence for it, the group's spam reporters and its own not-spam
// reporters, and the one with the highest p is returned (best when
// pooling does not apply). Not-spam reporters are not pooled: honest
// readers' not-spam reports of a legitimate message that a crafted
// mixture near a spam campaign captured must not count against the spam;
// so pooling never lowers a verdict. A store error leaves the decision on
// best's own reporters.
func (e *Checker) pool(ctx context.Context, best *candidate, matched []*candidate) *candidate {
	rs := e.reporters
	if rs == nil { // the store lists no reporters
		return best
	}
	group := poolGroup(best, matched, e.threshold)
	if group == nil {
		return best
	}
	spam := map[uint64]bool{}
	var in []*candidate // the group's campaigns whose reporters were read
	for i, c := range group {
		hs, over, err := c.rec.poolReporters(ctx, rs)
		if err != nil {
			e.log.Warn("check: reporters to pool", "campaign", c.rec.rec.ID, "err", err)
			return best
		}
		if over {
			if i == 0 {
				return best // best alone has plenty
			}
			continue // left out: never more than its reporters
		}
		for _, h := range hs {
			spam[h] = true
		}
		in = append(in, c)
	}
	if len(in) < 2 {
		return best
	}
	ns := int64(len(spam))
	var ws reporterWeights
	if ns <= trustLimit {
		hs := make([]uint64, 0, len(spam))
		for h := range spam {
			hs = append(hs, h)
		}
		var err error
		ids := make([]store.CampaignID, len(in))
		for i, c := range in {
			ids[i] = c.rec.rec.ID
		}
		if ws, err = e.trust.weights(ctx, ids, hs); err != nil {
			e.log.Warn("check: reporter trust of a pool", "campaign", best.rec.rec.ID, "err", err)
		}
	}
	out := best
	for _, c := range in {
		rec := *c.rec.rec
		if ns <= rec.SpamReporters {
			continue
		}
		rec.SpamReporters = ns
		d := e.policy.decide(&rec, c.evidence, c.inputs, c.gray, ws, e.threshold, e.th)
		for _, o := range in {
			if o != c {
				d.PooledWith = append(d.PooledWith, o.rec.rec.ID)
			}
		}
		c.decision = d
		if d.P > out.decision.P {
			out = c
		}
	}
	return out
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// joinIDs renders campaign IDs as "3, 7 and 9".
func joinIDs(ids []store.CampaignID) string {
	var b strings.Builder
	for i, id := range ids {
		switch {
		case i == 0:
		case i == len(ids)-1:
			b.WriteString(" and ")
		default:
			b.WriteString(", ")
		}
		fmt.Fprint(&b, id)
	}
	return b.String()
}
