package campaign

import (
	"github.com/nddmilter/nddmilter/internal/action"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/store"
)

// allBags is the evidence of a message matching all K+1 = 11 I-Match bags.
func allBags() []Evidence {
	ev := make([]Evidence, 11)
	for i := range ev {
		ev[i] = Evidence{Family: FamilyIMatch, Bag: i, Similarity: 1}
	}
	return ev
}

func TestThresholdsDefaults(t *testing.T) {
	th := DefaultPolicy().Thresholds()
	want := []struct {
		a        action.Action
		from, to float64
	}{
		{action.Accept, 0, 2.0 / 3},
		{action.Tag, 2.0 / 3, 9 / 9.4},
		{action.Quarantine, 9 / 9.4, 90 / 90.1},
		{action.Reject, 90 / 90.1, 1},
	}
	for i, w := range want {
		got := th[i]
		if got.Action != w.a || math.Abs(got.From-w.from) > 1e-6 || math.Abs(got.To-w.to) > 1e-6 {
			t.Errorf("threshold %d = %+v, want %v (%.6f, %.6f]", i, got, w.a, w.from, w.to)
		}
	}
}

func TestThresholdsNeverChosen(t *testing.T) {
	// With equal benefits, quarantine dominates reject: reject is never chosen.
	p := Policy{Benefit: Costs{Tag: 0.5, Quarantine: 1, Reject: 1}}
	th := p.Thresholds()
	if th[action.Reject].From != 1 || th[action.Reject].To != 1 {
		t.Errorf("reject range = %+v, want empty at 1", th[action.Reject])
	}
	if th[action.Quarantine].To != 1 {
		t.Errorf("quarantine range = %+v, want up to 1", th[action.Quarantine])
	}
}

func TestDecide(t *testing.T) {
	anddAt := func(sim float64) []Evidence {
		return []Evidence{{Family: FamilyANDD, Similarity: sim}}
	}
	qgramAt := func(sim float64) []Evidence {
		return []Evidence{{Family: FamilyQGram, Similarity: sim, Threshold: 0.55}}
	}
	camp := func(spam, ham, msgs int64) *store.Campaign {
		return &store.Campaign{ID: 7, SpamReports: spam, SpamReporters: spam, HamReporters: ham, HamReports: ham, Messages: msgs}
	}
	flooded := camp(1, 0, 1_000_000)
	flooded.SpamReports = 5000 // one reporter, five thousand reports
	allowed := camp(50, 0, 1000)
	allowed.State = store.StateAllowed
	revoked := camp(50, 0, 1000)
	revoked.State = store.StateRevoked
	tests := []struct {
		name     string
		policy   Policy
		c        *store.Campaign
		ev       []Evidence
		want     action.Action
		ruleHas  string
		minP     float64
		maxP     float64
		maxMatch float64
	}{
		{name: "single reporter, exact copy", c: camp(1, 0, 0), ev: allBags(), want: action.Tag, ruleHas: "tag: p=0.7500"},
		{name: "single reporter flooding, huge volume", c: flooded, ev: allBags(), want: action.Tag, maxP: 0.957},
		{name: "three reporters", c: camp(3, 0, 10), ev: allBags(), want: action.Quarantine},
		{name: "five reporters", c: camp(5, 0, 10), ev: allBags(), want: action.Reject, ruleHas: "reject: p=0.99", minP: 0.9989},
		{name: "many reporters, one bag only", c: camp(20, 0, 100), ev: allBags()[:1], want: action.Quarantine, maxP: 0.99},
		{name: "many reporters, two bags", c: camp(20, 0, 100), ev: allBags()[:2], want: action.Reject},
		{name: "ham report pulls down", c: camp(5, 1, 10), ev: allBags(), want: action.Quarantine},
		{name: "two ham reports pull further", c: camp(5, 2, 10), ev: allBags(), want: action.Tag},
		{name: "ham outweighs", c: camp(2, 2, 10), ev: allBags(), want: action.Accept, ruleHas: "accept: p="},
		{name: "allowed never acts", c: allowed, ev: allBags(), want: action.Accept, ruleHas: "allowed by an administrator"},
		{name: "revoked never acts", c: revoked, ev: allBags(), want: action.Accept, ruleHas: "revoked"},
		// The hand-set confidences hold ANDD alone at tag; the default
		// reads a confirmed campaign's copies with the calibrated model.
		{name: "ANDD at threshold caps at tag", policy: Policy{MatchModel: MatchConfidences}, c: camp(20, 0, 100), ev: anddAt(0.8), want: action.Tag, maxMatch: 0.7 + 1e-9},
		{name: "ANDD alone never beyond tag", policy: Policy{MatchModel: MatchConfidences}, c: camp(20, 0, 100), ev: anddAt(1), want: action.Tag, ruleHas: "ANDD 1.000 ≥ 0.800"},
		{name: "ANDD alone, unconfirmed campaign, tag", c: camp(4, 0, 100), ev: anddAt(1), want: action.Tag, ruleHas: "ANDD 1.000 ≥ 0.800"},
		{name: "ANDD alone, dissent, tag", c: camp(20, 1, 100), ev: anddAt(1), want: action.Tag},
		{name: "ANDD alone, confirmed campaign, quarantine", c: camp(20, 0, 100), ev: anddAt(1), want: action.Quarantine, ruleHas: "confirmed campaign"},
		// A confirmed campaign's close copies reach quarantine even where
		// p alone only tags them (policy.confirmed_similarity).
		{name: "confirmed, close q-gram copy, quarantine", c: camp(5, 0, 10), ev: qgramAt(0.82), want: action.Quarantine, ruleHas: "0.820 ≥ 0.80 (policy.confirmed_similarity)"},
		{name: "confirmed, q-gram copy below the bar, tag", c: camp(5, 0, 10), ev: qgramAt(0.78), want: action.Tag},
		{name: "four reporters, close copy, tag", c: camp(4, 0, 10), ev: qgramAt(0.9), want: action.Tag},
		{name: "confirmed with dissent, close copy, tag", c: camp(8, 1, 10), ev: qgramAt(0.9), want: action.Tag},
		{name: "confirmed, rule off, tag", policy: Policy{ConfirmedSimilarity: 1.5}, c: camp(5, 0, 10), ev: qgramAt(0.9), want: action.Tag},
		{name: "confirmed, close copy, max action tag", policy: Policy{MaxAction: "tag"}, c: camp(5, 0, 10), ev: qgramAt(0.9), want: action.Tag, ruleHas: "capped by max_action=tag"},
		{name: "ANDD and one bag reject", c: camp(20, 0, 100), ev: append(allBags()[:1], anddAt(0.95)...), want: action.Reject, ruleHas: "1 I-Match bag, ANDD 0.950"},
		{name: "ANDD below threshold is no evidence", c: camp(20, 0, 100), ev: anddAt(0.5), want: action.Accept, maxMatch: 0},
		{name: "min reporters guard", policy: Policy{PriorOdds: 1000}, c: camp(2, 0, 0), ev: allBags(), want: action.Quarantine, ruleHas: "reject needs 3 spam reporters, has 2"},
		{name: "max action cap", policy: Policy{MaxAction: "quarantine"}, c: camp(50, 0, 0), ev: allBags(), want: action.Quarantine, ruleHas: "capped by max_action=quarantine"},
		{name: "max action accept", policy: Policy{MaxAction: "accept"}, c: camp(50, 0, 0), ev: allBags(), want: action.Accept, ruleHas: "capped"},
		{name: "reject cost 1000 needs more", policy: Policy{CostFP: Costs{Reject: 1000}}, c: camp(5, 0, 10), ev: allBags(), want: action.Quarantine},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.policy.Decide(tt.c, tt.ev, 0.8)
			if d.Action != tt.want {
				t.Errorf("action = %v, want %v (rule %q)", d.Action, tt.want, d.Rule)
			}
			if tt.ruleHas != "" && !strings.Contains(d.Rule, tt.ruleHas) {
				t.Errorf("rule %q lacks %q", d.Rule, tt.ruleHas)
			}
			if tt.minP > 0 && d.P < tt.minP {
				t.Errorf("p = %v < %v", d.P, tt.minP)
			}
			if tt.maxP > 0 && d.P > tt.maxP {
				t.Errorf("p = %v > %v", d.P, tt.maxP)
			}
			if tt.maxMatch > 0 && d.Match > tt.maxMatch || tt.maxMatch == 0 && strings.Contains(tt.name, "no evidence") && d.Match != 0 {
				t.Errorf("match = %v, max %v", d.Match, tt.maxMatch)
			}
			if d.P < 0 || d.P > 1 || math.IsNaN(d.P) {
				t.Errorf("p = %v out of [0,1]", d.P)
			}
		})
	}
}

// A single reporter can never push a campaign beyond tag, whatever the
// volume and however many times they report.
func TestSingleReporterNeverRejects(t *testing.T) {
	p := DefaultPolicy()
	for _, msgs := range []int64{0, 1, 10, 1e3, 1e6, 1e9} {
		c := &store.Campaign{ID: 1, SpamReporters: 1, SpamReports: 1e6, Messages: msgs}
		d := p.Decide(c, allBags(), 0.8)
		if d.Action > action.Tag {
			t.Errorf("messages=%d: action %v (rule %q)", msgs, d.Action, d.Rule)
		}
	}
}

// More spam reporters never lower the action; more ham reporters never
// raise it.
func TestDecideMonotone(t *testing.T) {
	p := DefaultPolicy()
	for ham := int64(0); ham < 5; ham++ {
		prev := action.Accept
		for spam := int64(1); spam < 30; spam++ {
			d := p.Decide(&store.Campaign{SpamReporters: spam, HamReporters: ham}, allBags(), 0.8)
			if d.Action < prev {
				t.Fatalf("spam=%d ham=%d: %v after %v", spam, ham, d.Action, prev)
			}
			prev = d.Action
			d2 := p.Decide(&store.Campaign{SpamReporters: spam, HamReporters: ham + 1}, allBags(), 0.8)
			if d2.Action > d.Action {
				t.Fatalf("spam=%d ham=%d+1: %v > %v", spam, ham, d2.Action, d.Action)
			}
		}
	}
}

func TestShouldRevoke(t *testing.T) {
	tests := []struct {
		spam, ham int64
		want      bool
	}{
		{1, 0, false},
		{1, 1, false}, // one not-spam reporter is not enough
		{1, 2, true},
		{4, 2, true},
		{5, 2, false}, // 2 < 0.5 × 5
		{10, 5, true},
	}
	p := DefaultPolicy()
	for _, tt := range tests {
		if got := p.ShouldRevoke(&store.Campaign{SpamReporters: tt.spam, HamReporters: tt.ham}); got != tt.want {
			t.Errorf("spam=%d ham=%d: %v, want %v", tt.spam, tt.ham, got, tt.want)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		name string
		p    Policy
		ok   bool
	}{
		{"defaults", Policy{}, true},
		{"negative cost", Policy{CostFP: Costs{Reject: -1}}, false},
		{"LR below one", Policy{SpamReporterLR: 0.5}, false},
		{"confidence one", Policy{IMatchConfidence: 1}, false},
		{"bad action", Policy{MaxAction: "drop"}, false},
		{"NaN", Policy{MissCost: math.NaN()}, false},
		{"authserv id", Policy{AuthservIDs: []string{"mx.example.net"}}, true},
		{"empty authserv id", Policy{AuthservIDs: []string{" "}}, false},
		{"authserv id with a result", Policy{AuthservIDs: []string{"mx; dkim=pass"}}, false},
		{"trust max below one", Policy{TrustMax: 0.5}, false},
		{"trust off", Policy{TrustHistory: -1}, true},
		{"negative confirmed similarity", Policy{ConfirmedSimilarity: -0.1}, false},
		{"confirmed similarity off", Policy{ConfirmedSimilarity: 2}, true},
	}
	for _, tt := range tests {
		if err := tt.p.Validate(); (err == nil) != tt.ok {
			t.Errorf("%s: err = %v", tt.name, err)
		}
	}
}

func TestDescribeThresholds(t *testing.T) {
	got := strings.Join(DefaultPolicy().DescribeThresholds(), "\n")
	for _, want := range []string{
		"accept      p ≤ 0.6667",
		"tag         0.6667 < p ≤ 0.9574  (cost_fp 1, benefit 0.5)",
		"quarantine  0.9574 < p ≤ 0.9989  (cost_fp 10, benefit 0.9)",
		"reject      p > 0.9989  (cost_fp 100, benefit 1)",
		"≥ 3 distinct spam reporters",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	never := Policy{Benefit: Costs{Quarantine: 1}}.DescribeThresholds()
	if !strings.Contains(never[action.Reject], "never") {
		t.Errorf("dominated reject: %q", never[action.Reject])
	}
}

// TestReporterLadder pins what README.md says of the default policy: an
// exact copy (every I-Match bag and ANDD) of a campaign seen in no other
// message is tagged with 1–2 distinct spam reporters, quarantined with 3–4
// and rejected from 5. Volume (capped at ×2 odds) can lift 2 reporters to
// quarantine, never 4 to reject; reject_min_reporters (3) does not bind
// with the default costs.
func TestReporterLadder(t *testing.T) {
	pol := Policy{}
	ev := append(allBags(), Evidence{Family: FamilyANDD, Similarity: 1})
	T, Q, R := action.Tag, action.Quarantine, action.Reject
	for _, tt := range []struct {
		msgs int64
		want []action.Action // by number of reporters, from 1
	}{
		{0, []action.Action{T, T, Q, Q, R, R}},
		{1e9, []action.Action{T, Q, Q, Q, R, R}},
	} {
		for i, w := range tt.want {
			c := &store.Campaign{ID: 1, SpamReporters: int64(i + 1), Messages: tt.msgs}
			if d := pol.Decide(c, ev, 0.8); d.Action != w {
				t.Errorf("%d reporters, %d messages: %v, want %v (%s)", i+1, tt.msgs, d.Action, w, d.Rule)
			}
		}
	}
}

// TestShortEvidenceActions pins what short-message evidence alone can do
// with the default policy: a short key tags, and quarantines once the
// campaign has 3 spam reporters; a lead key only tags; neither rejects,
// and neither adds to I-Match or ANDD evidence.
func TestShortEvidenceActions(t *testing.T) {
	p := DefaultPolicy()
	short := []Evidence{{Family: FamilyShort, Kind: "media", Similarity: 1}, {Family: FamilyShort, Kind: "all", Similarity: 1}}
	lead := []Evidence{{Family: FamilyShort, Kind: "lead", Similarity: 1}}
	im := Evidence{Family: FamilyIMatch, Similarity: 1}
	cases := []struct {
		name      string
		ev        []Evidence
		reporters int64
		want      action.Action
	}{
		{"short key, 1 reporter", short, 1, action.Tag},
		{"short key, 2 reporters", short, 2, action.Tag},
		{"short key, 3 reporters", short, 3, action.Quarantine},
		{"short key, 50 reporters", short, 50, action.Quarantine},
		{"lead key, 1 reporter", lead, 1, action.Tag},
		{"lead key, 50 reporters", lead, 50, action.Tag},
		{"I-Match bag and short key, 50 reporters", append([]Evidence{im}, short...), 50, action.Quarantine},
	}
	for _, c := range cases {
		d := p.Decide(&store.Campaign{ID: 1, SpamReporters: c.reporters}, c.ev, 0.59)
		if d.Action != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, d.Action, d.Rule, c.want)
		}
	}
	if got := p.MatchConfidence(append([]Evidence{im}, short...), 0.59); got != p.IMatchConfidence {
		t.Errorf("I-Match bag and short key: match %v, want the I-Match bag's %v", got, p.IMatchConfidence)
	}
	d := p.Decide(&store.Campaign{ID: 1, SpamReporters: 1}, append(short, lead...), 0.59)
	if s := d.evidenceSummary(); s != "short-message keys (media, all, lead)" || !slices.Equal(d.Short, []string{"media", "all", "lead"}) {
		t.Errorf("summary %q, short %v", s, d.Short)
	}
}

// The confirmed-copy rule reads the reporters' records: five reporters
// whose records weigh less than five (their campaigns were allowed or
// revoked since) do not raise a close copy to quarantine.
func TestConfirmedCloseNeedsTrustedReporters(t *testing.T) {
	p := DefaultPolicy()
	c := &store.Campaign{ID: 3, SpamReporters: 5, SpamReports: 5, Messages: 10}
	ev := []Evidence{{Family: FamilyQGram, Similarity: 0.9, Threshold: 0.55}}
	tests := []struct {
		name string
		w    reporterWeights
		want action.Action
	}{
		{"no records", nil, action.Quarantine},
		{"records agree", reporterWeights{1.5, 1.5, 1.2, 1, 1}, action.Quarantine},
		{"records contradict", reporterWeights{1, 1, 1, 0.5, 0.4}, action.Tag},
	}
	for _, tt := range tests {
		d := p.decide(c, ev, inputsOf(ev), nil, tt.w, 0.8, p.Thresholds())
		if d.Action != tt.want {
			t.Errorf("%s: action %v, want %v (%s)", tt.name, d.Action, tt.want, d.Explain())
		}
	}
}
