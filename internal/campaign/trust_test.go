package campaign

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/store"
)

func TestTrustWeight(t *testing.T) {
	p := DefaultPolicy()
	tests := []struct {
		agreed, contradicted int
		want                 float64
	}{
		{0, 0, 1},
		{0, 1, 0.8},
		{0, 4, 0.5},
		{0, 12, 0.25},
		{4, 0, 1.25},
		{1000, 0, 1.498},
		{100, 2, 1.453},
		{10, 10, 0.792},
	}
	for _, tt := range tests {
		if got := p.trustWeight(tt.agreed, tt.contradicted); math.Abs(got-tt.want) > 0.001 {
			t.Errorf("agreed %d, contradicted %d: weight %.4f, want %.3f", tt.agreed, tt.contradicted, got, tt.want)
		}
	}
	// Bounds: more agreement never lowers a weight, more contradiction
	// never raises it, and no record goes above TrustMax.
	for a := range 50 {
		for c := range 50 {
			w := p.trustWeight(a, c)
			if w <= 0 || w > p.TrustMax || p.trustWeight(a+1, c) < w || p.trustWeight(a, c+1) > w {
				t.Fatalf("agreed %d, contradicted %d: weight %v out of bounds or order", a, c, w)
			}
		}
	}
}

func TestTrustRecord(t *testing.T) {
	p := DefaultPolicy()
	cs := []store.ReporterCampaign{
		{ID: 1, Kind: store.KindSpam, State: store.StateActive, SpamReporters: 5},                  // agreed
		{ID: 2, Kind: store.KindSpam, State: store.StateActive, SpamReporters: 5, HamReporters: 1}, // disputed: neither
		{ID: 3, Kind: store.KindSpam, State: store.StateAllowed, SpamReporters: 1},                 // contradicted
		{ID: 4, Kind: store.KindSpam, State: store.StateRevoked, SpamReporters: 2, HamReporters: 2},
		{ID: 5, Kind: store.KindSpam, State: store.StateActive, SpamReporters: 1}, // not judged yet
		{ID: 6, Kind: store.KindHam, State: store.StateAllowed, HamReporters: 1},  // a not-spam report: not counted
	}
	r := p.trustRecord(cs)
	if r.Judged != 5 || r.Agreed != 1 || r.Contradicted != 2 {
		t.Fatalf("record %+v", r)
	}
	if want := p.trustWeight(1, 2); r.Weight != want {
		t.Errorf("weight %v, want %v", r.Weight, want)
	}
	for _, tt := range []struct {
		without []store.CampaignID
		want    float64
	}{
		{nil, p.trustWeight(1, 2)},
		{[]store.CampaignID{1}, p.trustWeight(0, 2)},
		{[]store.CampaignID{3}, p.trustWeight(1, 1)},
		{[]store.CampaignID{5, 9}, p.trustWeight(1, 2)},
		{[]store.CampaignID{1, 3, 4}, 1},
	} {
		if got := p.without(r, tt.without); got != tt.want {
			t.Errorf("without %v: %v, want %v", tt.without, got, tt.want)
		}
	}
}

// A reporter whose spam reports administrators allowed, or not-spam
// reports revoked, loses weight: its next report alone no longer tags
// other people's copies. The same reports with reporter trust off still
// tag them.
func TestDistrustedReporter(t *testing.T) {
	allow := func(t *testing.T, f *fixture, i int, id store.CampaignID) {
		if err := f.eng.Ingester.SetState(f.ctx, id, store.StateAllowed); err != nil {
			t.Fatal(err)
		}
	}
	revoke := func(t *testing.T, f *fixture, i int, id store.CampaignID) {
		for _, who := range []string{"carol", "dave"} {
			f.report(t, legitMessage(i), store.KindHam, who)
		}
		if c, err := f.st.Record(f.ctx, id); err != nil || c.State != store.StateRevoked {
			t.Fatalf("campaign %d not revoked: %+v, %v", id, c, err)
		}
	}
	for _, tt := range []struct {
		name       string
		policy     Policy
		contradict func(*testing.T, *fixture, int, store.CampaignID)
		want       action.Action
	}{
		{"allowed by an administrator", Policy{}, allow, action.Accept},
		{"revoked by not-spam reports", Policy{}, revoke, action.Accept},
		{"trust off", Policy{TrustHistory: -1}, allow, action.Tag},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Options{Policy: tt.policy})
			for i := range legitTexts {
				o := f.report(t, legitMessage(i), store.KindSpam, "mallory@example.org")
				tt.contradict(t, f, i, o.Campaign)
			}
			f.report(t, baseMessage(0), store.KindSpam, "mallory@example.org")
			v := f.check(t, copyOf(t, 0, 7))
			if v.Campaign == 0 || v.Action != tt.want {
				t.Fatalf("action %v, want %v: %s", v.Action, tt.want, v.Rule)
			}
			if tt.want == action.Accept {
				w := fmt.Sprintf("weighing %.2f by their records", p4(len(legitTexts)))
				if !strings.Contains(v.Rule, w) || v.Decision.SpamWeight != p4(len(legitTexts)) {
					t.Errorf("rule %q (spam weight %v) does not say %q", v.Rule, v.Decision.SpamWeight, w)
				}
				rec, ok, err := f.eng.Reader.ReporterTrust(f.ctx, store.ReporterHash("mallory@example.org"))
				if err != nil || !ok || rec.Contradicted != len(legitTexts) || rec.Judged != len(legitTexts)+1 {
					t.Errorf("record %+v, %v, %v", rec, ok, err)
				}
			}
		})
	}
}

// p4 is the weight of a reporter with n contradicted campaigns and none
// agreed, under the default policy, rounded as Decision.SpamWeight.
func p4(n int) float64 {
	p := DefaultPolicy()
	return math.Round(p.trustWeight(0, n)*1000) / 1000
}

// Reporters whose reports others confirmed gain weight: two of them
// quarantine a campaign that two accounts without a record only tag. One
// of them alone still only tags: one account never raises a campaign
// above tag.
func TestTrustedReporters(t *testing.T) {
	for _, tt := range []struct {
		name      string
		policy    Policy
		reporters []string
		want      action.Action
	}{
		{"two trusted", Policy{}, []string{"alice", "bob"}, action.Quarantine},
		{"two trusted, trust off", Policy{TrustHistory: -1}, []string{"alice", "bob"}, action.Tag},
		{"two without a record", Policy{}, []string{"carol", "dave"}, action.Tag},
		{"one trusted", Policy{}, []string{"alice"}, action.Tag},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Options{Policy: tt.policy})
			for i := range campaignTexts {
				for r, who := range []string{"alice", "bob", "x1", "x2", "x3"} {
					o := f.report(t, copyOf(t, i, uint64(100*i+r)), store.KindSpam, who)
					if o.Campaign == 0 {
						t.Fatalf("report %d of campaign %d: %+v", r, i, o)
					}
				}
			}
			for _, who := range tt.reporters {
				f.report(t, legitMessage(0), store.KindSpam, who)
			}
			v := f.check(t, legitCopy(t, 0, 3))
			if v.Campaign == 0 || v.Action != tt.want {
				t.Fatalf("action %v, want %v: %s", v.Action, tt.want, v.Rule)
			}
		})
	}
}
