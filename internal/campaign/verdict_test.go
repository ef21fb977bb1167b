package campaign

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/store"
)

// The one-line explanation is rendered from the structured fields: the
// README's example line comes out of a verdict built field by field.
func TestVerdictExplain(t *testing.T) {
	d := &Decision{
		Action: action.Tag, P: 0.75, Match: 1, Reputation: 0.75, Campaign: 1,
		SpamReporters: 1, IMatchBags: 11, ANDD: 1, ANDDThreshold: 0.589,
		Threshold: 2.0 / 3, CostFP: 1,
	}
	d.Rule = d.Explain()
	const readme = "tag: p=0.7500 > 0.6667 (cost_fp.tag=1); p = match 1.0000 (11 I-Match bags, ANDD 1.000 ≥ 0.589) × reputation 0.7500 (1 spam/0 not-spam reporters, 0 msgs)"
	if d.Rule != readme {
		t.Fatalf("decision rule\n %q, want\n %q", d.Rule, readme)
	}
	rd := &Decision{Campaign: 2, State: store.StateRevoked, P: 0.9, SpamReporters: 4, HamReporters: 2}
	rd.Rule = rd.Explain()
	tests := []struct {
		name string
		v    Verdict
		want string
	}{
		{"no match", Verdict{}, "accept: no campaign matched"},
		{"store error", Verdict{Failed: "store"}, "accept: store error"},
		{"too short", Verdict{Skip: &Skip{Reason: SkipTooShort, Unique: 3}}, "accept: no signature, too short for a signature (3 unique words)"},
		{"too short, signer's reason", Verdict{Skip: &Skip{Reason: SkipTooShort, Unique: 8, Signer: "too few lexicon words"}},
			"accept: no signature, too short for a signature (8 unique words; too few lexicon words)"},
		{"footer only", Verdict{FooterOnly: []FooterOnly{{Campaign: 4, Full: 0.7, Body: 0.2, Threshold: 0.589}}},
			"accept: campaign 4 matched through the mailing-list footer only (ANDD 0.700 with the footer, 0.200 without it; 0.589 needed)"},
		{"decision", Verdict{Decision: d}, readme},
		{"allowed set aside", Verdict{Decision: d, OtherCampaigns: []store.CampaignID{2},
			Exempt: &Exempt{Campaign: 2, State: store.StateAllowed, Acting: 1, ActingAction: action.Tag,
				Why: "it is not a near-copy of campaign 2 as a whole (q-grams 0.364 < 0.550)"}},
			readme + "; campaign 2 is allowed by an administrator but the allow covers its mailing only, and it is not a near-copy of campaign 2 as a whole (q-grams 0.364 < 0.550): campaign 1's tag stands; 2 campaigns matched"},
		{"revoked followed", Verdict{Decision: rd,
			Exempt: &Exempt{Campaign: 2, State: store.StateRevoked, Acting: 1, ActingAction: action.Quarantine, Followed: true,
				Why: "it is a near-copy of campaign 2 as a whole (ANDD 0.970 ≥ 0.808), at least as close as to any campaign to act on"}},
			"accept: campaign 2 is revoked by not-spam reports (2 not-spam vs 4 spam reporters; p=0.9000 ignored); campaign 1's quarantine set aside: it is a near-copy of campaign 2 as a whole (ANDD 0.970 ≥ 0.808), at least as close as to any campaign to act on"},
		{"everything", Verdict{Decision: d, FooterNote: "ANDD still 0.900 without the mailing-list footer",
			OtherCampaigns: []store.CampaignID{7},
			FooterOnly:     []FooterOnly{{Campaign: 9, Full: 0.6, Why: "no weighted word without it", Threshold: 0.589}},
			Cap:            &Cap{From: action.Reject, To: action.Tag, By: "milter.overrides example.org"}, Deferred: true},
			readme + "; ANDD still 0.900 without the mailing-list footer; 2 campaigns matched" +
				"; ignored: campaign 9 matched through the mailing-list footer only (ANDD 0.600 with the footer, no weighted word without it; 0.589 needed)" +
				"; reject capped to tag by milter.overrides example.org; deferred with a 4xx reply (milter.reject_with: tempfail)"},
	}
	for _, tt := range tests {
		if got := tt.v.Explain(); got != tt.want {
			t.Errorf("%s:\n got  %q\n want %q", tt.name, got, tt.want)
		}
	}
}

func TestVerdictTaken(t *testing.T) {
	v := Verdict{Action: action.Reject, Deferred: true}
	if v.Taken() != action.Tempfail {
		t.Errorf("deferred reject taken as %v", v.Taken())
	}
	v.Deferred = false
	if v.Taken() != action.Reject {
		t.Errorf("reject taken as %v", v.Taken())
	}
}

// The JSON form keeps the rule and adds the structured fields; it reads
// back (the command line decodes the API's verdicts).
func TestVerdictJSON(t *testing.T) {
	d := DefaultPolicy().Decide(&store.Campaign{ID: 3, SpamReporters: 5, Messages: 10}, []Evidence{{Family: FamilyIMatch, Similarity: 1}}, 0.6)
	v := Verdict{Action: d.Action, Campaign: 3, Score: d.P, Decision: &d, Cap: &Cap{From: action.Quarantine, To: action.Tag, By: "x"}}
	v.Rule = v.Explain()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"rule":"`, `"decision":{"action":"`, `"reputation":`, `"cap":{"from":"quarantine","to":"tag","by":"x"}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON lacks %s: %s", want, b)
		}
	}
	var back Verdict
	if err := json.Unmarshal(b, &back); err != nil || back.Rule != v.Rule || back.Decision.Reputation != d.Reputation || back.Cap.To != action.Tag {
		t.Errorf("read back: %+v %v", back, err)
	}
}

func TestSkipReasonText(t *testing.T) {
	for r := NotSkipped; r <= SkipBandsInBatch; r++ {
		b, err := r.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back SkipReason
		if err := back.UnmarshalText(b); err != nil || back != r {
			t.Errorf("%v: read back %v, %v", r, back, err)
		}
		if r != NotSkipped && !strings.HasPrefix(Skip{Reason: r}.String(), r.String()[:min(len(r.String()), 19)]) {
			t.Errorf("%v: details %q do not start like the reason", r, Skip{Reason: r})
		}
	}
	var r SkipReason
	if err := r.UnmarshalText([]byte("bored")); err == nil {
		t.Error("unknown reason read")
	}
}
