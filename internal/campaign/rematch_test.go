package campaign

import (
	"testing"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/pipeline"
	"github.com/nddmilter/nddmilter/internal/store"
)

// A copy accepted before its campaign was reported matches the campaign
// from its kept evidence once reporters escalate it, and re-matching
// counts nothing.
func TestMatchEvidenceAfterEscalation(t *testing.T) {
	f := newFixture(t, Options{})
	raw := copyOf(t, 0, 7)
	v, m, err := f.eng.Checker.CheckEvidence(f.ctx, raw, CheckOptions{})
	if err != nil || v.Action != action.Accept || m == nil {
		t.Fatalf("CheckEvidence before any report: %+v, %v, %v", v, m, err)
	}
	ev, err := m.MarshalEvidence(pipeline.EvidenceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var id store.CampaignID
	for i, r := range []string{"alice", "bob", "carol", "dave", "erin"} {
		id = f.report(t, copyOf(t, 0, uint64(20+i)), store.KindSpam, r).Campaign
	}
	f.st.FlushHits(f.ctx)
	before, _ := f.st.Get(f.ctx, id)
	got, err := f.eng.Checker.MatchEvidence(f.ctx, ev, nil)
	if err != nil || got.Campaign != id || got.Action < action.Quarantine {
		t.Fatalf("MatchEvidence after five reporters: %+v, %v", got, err)
	}
	want := f.check(t, raw)
	if want.Action != got.Action || want.Campaign != got.Campaign {
		t.Errorf("MatchEvidence %v/%d, a check of the same message %v/%d", got.Action, got.Campaign, want.Action, want.Campaign)
	}
	f.st.FlushHits(f.ctx)
	after, _ := f.st.Get(f.ctx, id)
	if after.Messages != before.Messages+1 { // the check above only
		t.Errorf("MatchEvidence counted: messages %d → %d", before.Messages, after.Messages)
	}
	// Allowed: never acted on.
	if _, err := f.eng.Ingester.Allow(f.ctx, id, true); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.eng.Checker.MatchEvidence(f.ctx, ev, nil); got.Action != action.Accept {
		t.Errorf("MatchEvidence of an allowed campaign: %+v", got)
	}
	// Malformed evidence is an error, never a panic.
	if _, err := f.eng.Checker.MatchEvidence(f.ctx, ev[:len(ev)/2], nil); err == nil {
		t.Error("truncated evidence matched")
	}
}

// A reply let through as graymail is matched again as graymail: its signs
// (the reply header, which the evidence does not hold) come back with
// its evidence, so a purge takes back only what a check would act on.
func TestMatchEvidenceKeepsGraymail(t *testing.T) {
	f := newFixture(t, Options{})
	for _, r := range []string{"alice", "bob", "carol"} {
		f.report(t, copyOf(t, 0, 30), store.KindSpam, r)
	}
	raw := append([]byte("In-Reply-To: <thread@reply.example>\r\n"), copyOf(t, 0, 31)...)
	v, m, err := f.eng.Checker.CheckEvidence(f.ctx, raw, CheckOptions{})
	if err != nil || m == nil || v.Campaign == 0 || v.Action > action.Tag || v.Decision == nil || v.Decision.Graymail == nil {
		t.Fatalf("CheckEvidence of the reply: %+v, %v (want a campaign held back as graymail)", v, err)
	}
	ev, err := m.MarshalEvidence(pipeline.EvidenceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	signs, err := pipeline.MarshalSigns(m.Signs())
	if err != nil || signs == nil {
		t.Fatalf("signs %q, %v", signs, err)
	}
	got, err := f.eng.Checker.MatchEvidence(f.ctx, ev, signs)
	if err != nil || got.Action != v.Action || got.Campaign != v.Campaign {
		t.Errorf("MatchEvidence with the signs: %v/%d, %v; the check: %v/%d", got.Action, got.Campaign, err, v.Action, v.Campaign)
	}
	if bare, _ := f.eng.Checker.MatchEvidence(f.ctx, ev, nil); bare.Action <= v.Action {
		t.Errorf("without its signs the reply is %v, as with them: the test does not test them", bare.Action)
	}
	// Undecodable signs: matched on the evidence alone, never an error.
	if _, err := f.eng.Checker.MatchEvidence(f.ctx, ev, []byte("{")); err != nil {
		t.Errorf("undecodable signs: %v", err)
	}
}
