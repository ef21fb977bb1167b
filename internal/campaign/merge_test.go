package campaign

import (
	"slices"
	"testing"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/store"
)

// sk is a 64-bit sketch with the low `flip` bits of base flipped: the
// cosine of two such sketches is cos(π·d/64) for d differing bits.
func sk(base uint64, flip int) andd.Sketch {
	return andd.Sketch{Bits: []uint64{base ^ (1<<flip - 1)}}
}

func TestPlanReport(t *testing.T) {
	const th = 0.589 // about 19 of 64 bits may differ
	var (
		a  = sk(0, 0)
		a2 = sk(0, 4)  // near a
		b  = sk(0, 40) // far from a
	)
	active, allowed, revoked := store.StateActive, store.StateAllowed, store.StateRevoked
	tests := []struct {
		name  string
		cands []mergeCandidate
		apart bool
		want  reportPlan
	}{
		{"nothing matched", nil, true, reportPlan{}},
		{"one campaign through I-Match", []mergeCandidate{
			{ID: 4, State: active, IMatch: 3, ANDD: 0.9, Sketches: []andd.Sketch{a}},
		}, true, reportPlan{Target: 4}},
		{"ANDD only, report with I-Match signatures: apart", []mergeCandidate{
			{ID: 4, State: active, ANDD: 0.9, Sketches: []andd.Sketch{a}},
		}, true, reportPlan{Apart: true, Why: voteANDDOnly}},
		{"ANDD only, no I-Match signature: a vote", []mergeCandidate{
			{ID: 4, State: active, ANDD: 0.9, Sketches: []andd.Sketch{a}},
		}, false, reportPlan{Target: 4, VoteOnly: true, Why: voteANDDOnly}},
		{"allowed campaign: a vote", []mergeCandidate{
			{ID: 4, State: allowed, IMatch: 11, ANDD: 1, Sketches: []andd.Sketch{a}},
		}, true, reportPlan{Target: 4, VoteOnly: true, Why: voteNotActive}},
		{"revoked campaign: a vote", []mergeCandidate{
			{ID: 4, State: revoked, ANDD: 0.9, Sketches: []andd.Sketch{a}},
		}, true, reportPlan{Target: 4, VoteOnly: true, Why: voteNotActive}},
		{"two near-duplicate campaigns through I-Match: merged", []mergeCandidate{
			{ID: 7, State: active, IMatch: 1, ANDD: 0.8, Sketches: []andd.Sketch{a2}},
			{ID: 4, State: active, IMatch: 2, ANDD: 0.9, Sketches: []andd.Sketch{a}},
		}, true, reportPlan{Target: 4, Merge: []store.CampaignID{7}}},
		{"two sketchless campaigns through I-Match: merged", []mergeCandidate{
			{ID: 4, State: active, IMatch: 1, ANDD: -1},
			{ID: 7, State: active, IMatch: 1, ANDD: -1},
		}, true, reportPlan{Target: 4, Merge: []store.CampaignID{7}}},
		{"the other matched through ANDD only: ambiguous", []mergeCandidate{
			{ID: 4, State: active, IMatch: 2, ANDD: 0.9, Sketches: []andd.Sketch{a}},
			{ID: 7, State: active, ANDD: 0.9, Sketches: []andd.Sketch{a2}},
		}, true, reportPlan{Target: 4, VoteOnly: true, Why: voteAmbiguous}},
		{"dissimilar campaigns: ambiguous", []mergeCandidate{
			{ID: 4, State: active, IMatch: 2, ANDD: 0.9, Sketches: []andd.Sketch{a}},
			{ID: 7, State: active, IMatch: 1, ANDD: 0.7, Sketches: []andd.Sketch{b}},
		}, true, reportPlan{Target: 4, VoteOnly: true, Why: voteAmbiguous}},
		{"one far sketch among near ones: ambiguous (every pair must be near)", []mergeCandidate{
			{ID: 4, State: active, IMatch: 2, ANDD: 0.9, Sketches: []andd.Sketch{a}},
			{ID: 7, State: active, IMatch: 1, ANDD: 0.7, Sketches: []andd.Sketch{a2, b}},
		}, true, reportPlan{Target: 4, VoteOnly: true, Why: voteAmbiguous}},
		{"a sketch on one side only: ambiguous", []mergeCandidate{
			{ID: 4, State: active, IMatch: 2, ANDD: 0.9, Sketches: []andd.Sketch{a}},
			{ID: 7, State: active, IMatch: 1, ANDD: -1},
		}, true, reportPlan{Target: 4, VoteOnly: true, Why: voteAmbiguous}},
		{"an allowed campaign among them: ambiguous, counted on the best", []mergeCandidate{
			{ID: 4, State: allowed, IMatch: 1, ANDD: 0.9, Sketches: []andd.Sketch{a}},
			{ID: 7, State: active, IMatch: 3, ANDD: 0.9, Sketches: []andd.Sketch{a2}},
		}, true, reportPlan{Target: 7, VoteOnly: true, Why: voteAmbiguous}},
		{"the best is allowed: a vote, nothing merged", []mergeCandidate{
			{ID: 4, State: allowed, IMatch: 3, ANDD: 0.9, Sketches: []andd.Sketch{a}},
			{ID: 7, State: active, IMatch: 1, ANDD: 0.9, Sketches: []andd.Sketch{a2}},
		}, true, reportPlan{Target: 4, VoteOnly: true, Why: voteNotActive}},
		{"ties: the higher ANDD similarity, then the oldest", []mergeCandidate{
			{ID: 9, State: active, IMatch: 1, ANDD: 0.8, Sketches: []andd.Sketch{a}},
			{ID: 8, State: active, IMatch: 1, ANDD: 0.9, Sketches: []andd.Sketch{a}},
			{ID: 5, State: active, IMatch: 1, ANDD: 0.8, Sketches: []andd.Sketch{a2}},
		}, true, reportPlan{Target: 8, Merge: []store.CampaignID{5, 9}}},
		{"ANDD only, a near copy of every sketch: joined", []mergeCandidate{
			{ID: 4, State: active, ANDD: 0.98, Sketches: []andd.Sketch{a, sk(0, 6)}, Report: &a2},
		}, true, reportPlan{Target: 4}},
		{"ANDD only, a near copy of one sketch only: apart", []mergeCandidate{
			{ID: 4, State: active, ANDD: 0.98, Sketches: []andd.Sketch{a, sk(0, 20)}, Report: &a2},
		}, true, reportPlan{Apart: true, Why: voteANDDOnly}},
		{"merged with a campaign the report nearly copies", []mergeCandidate{
			{ID: 4, State: active, IMatch: 2, ANDD: 1, Sketches: []andd.Sketch{a}, Report: &a},
			{ID: 7, State: active, ANDD: 0.98, Sketches: []andd.Sketch{a2}, Report: &a},
		}, true, reportPlan{Target: 4, Merge: []store.CampaignID{7}}},
		{"an ANDD-only match that is no near copy: ambiguous", []mergeCandidate{
			{ID: 4, State: active, IMatch: 2, ANDD: 1, Sketches: []andd.Sketch{a}, Report: &a},
			{ID: 7, State: active, ANDD: 0.83, Sketches: []andd.Sketch{sk(0, 12)}, Report: &a},
		}, true, reportPlan{Target: 4, VoteOnly: true, Why: voteAmbiguous}},
		{"three campaigns, one not near the third: ambiguous", []mergeCandidate{
			{ID: 1, State: active, IMatch: 3, ANDD: 0.9, Sketches: []andd.Sketch{sk(0, 10)}},
			{ID: 2, State: active, IMatch: 2, ANDD: 0.9, Sketches: []andd.Sketch{sk(0, 0)}},
			{ID: 3, State: active, IMatch: 1, ANDD: 0.9, Sketches: []andd.Sketch{sk(0, 25)}},
		}, true, reportPlan{Target: 1, VoteOnly: true, Why: voteAmbiguous}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.cands)
			got := planReport(tt.cands, th, tt.apart)
			if got.Target != tt.want.Target || !slices.Equal(got.Merge, tt.want.Merge) ||
				got.VoteOnly != tt.want.VoteOnly || got.Apart != tt.want.Apart || got.Why != tt.want.Why {
				t.Errorf("planReport = %+v, want %+v", got, tt.want)
			}
			if !slices.EqualFunc(in, tt.cands, func(x, y mergeCandidate) bool { return x.ID == y.ID }) {
				t.Errorf("planReport reordered its input")
			}
			if got.Target != 0 && slices.Contains(got.Merge, got.Target) {
				t.Errorf("target %d among the merged %v", got.Target, got.Merge)
			}
		})
	}
}
