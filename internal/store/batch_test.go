package store

import (
	"fmt"
	"slices"
	"testing"
)

// batchInputs is a mixed ingestion stream: campaigns of 11 keys, copies
// that add new keys, repeated reporters, and bridges that merge two
// campaigns (some created earlier in the same batch).
func batchInputs(n int) []ReportInput {
	var ins []ReportInput
	for i := 0; i < n; i++ {
		c := i % 1200
		var ks []string
		for j := 0; j < 11; j++ {
			ks = append(ks, fmt.Sprintf("c%d-k%d", c, j))
		}
		if i >= 1200 {
			ks = append(ks[:6], fmt.Sprintf("c%d-new%d", c, i)) // a copy with a new key
		}
		if i%97 == 50 {
			ks = append(ks, fmt.Sprintf("c%d-k3", (c+7)%1200)) // bridge: merge
		}
		in := spam(fmt.Sprintf("rep%d", i%37), t0, ks...)
		if i%5 == 0 {
			in.Kind = KindHam
		}
		in.Sketch = []byte{byte(c), byte(c >> 8), byte(i % 3)}
		ins = append(ins, in)
	}
	return ins
}

// TestReportBatchEqualsReports checks that one ReportBatch call of 3,000
// reports (~60,000 entries: several transactions of the batch budget)
// leaves exactly the store that 3,000 single Report calls leave.
func TestReportBatchEqualsReports(t *testing.T) {
	ins := batchInputs(3000)
	a := openTest(t, "", Options{NoSyncWrites: true, Expiry: -1})
	b := openTest(t, "", Options{NoSyncWrites: true, Expiry: -1})
	got, err := a.ReportBatch(ctx, slices.Clone(ins))
	if err != nil || len(got) != len(ins) {
		t.Fatalf("ReportBatch: %d results, %v", len(got), err)
	}
	for i, in := range ins {
		want := mustReport(t, b, in)
		g := got[i]
		if g.Campaign != want.Campaign || g.Created != want.Created || g.Repeated != want.Repeated ||
			!slices.Equal(g.Merged, want.Merged) {
			t.Fatalf("report %d: batch %+v, single %+v", i, g, want)
		}
	}
	ca, err := a.List(ctx, Query{})
	if err != nil {
		t.Fatal(err)
	}
	cb, err := b.List(ctx, Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ca) != len(cb) || len(ca) == 0 {
		t.Fatalf("%d campaigns after the batch, %d after single reports", len(ca), len(cb))
	}
	merged := 0
	for i := range ca {
		x, y := mustGet(t, a, ca[i].ID), mustGet(t, b, cb[i].ID)
		if x.ID != y.ID || x.SpamReports != y.SpamReports || x.HamReports != y.HamReports ||
			x.SpamReporters != y.SpamReporters || x.HamReporters != y.HamReporters ||
			!slices.Equal(sortedKeys(x), sortedKeys(y)) || len(x.Sketches) != len(y.Sketches) ||
			!slices.Equal(x.MergedFrom, y.MergedFrom) || x.SampleSubject != y.SampleSubject {
			t.Fatalf("campaign %d differs:\nbatch  %+v\nsingle %+v", x.ID, x, y)
		}
		merged += len(x.MergedFrom)
	}
	if merged == 0 {
		t.Error("the stream merged no campaigns")
	}
	verifyClean(t, a)
	verifyClean(t, b)
}

// TestReportBatchDrainsLargeMerge: a report in the middle of a batch that
// merges a campaign too large for one transaction drains it first; the
// reports before and after it are applied normally.
func TestReportBatchDrainsLargeMerge(t *testing.T) {
	s := openTest(t, "", Options{NoSyncWrites: true, Expiry: -1})
	small := mustReport(t, s, spam("r", t0, "small")).Campaign
	big := bigCampaign(t, s, "big", 24000)
	var ins []ReportInput
	for i := 0; i < 200; i++ {
		ins = append(ins, spam(fmt.Sprintf("rep%d", i), t0, fmt.Sprintf("other-%d", i)))
		if i == 100 {
			ins = append(ins, spam("joiner", t0, "small", "big-000001"))
		}
	}
	res, err := s.ReportBatch(ctx, ins)
	if err != nil || len(res) != len(ins) {
		t.Fatalf("ReportBatch: %d results, %v", len(res), err)
	}
	if r := res[101]; r.Campaign != small || !slices.Equal(r.Merged, []CampaignID{big}) {
		t.Fatalf("bridge: %+v", r)
	}
	if c := mustGet(t, s, small); len(c.Keys) != 24001 || c.SpamReports != 1+12+1 { // small, big's 12 reports, the joiner
		t.Errorf("merged: %d keys, %d reports", len(c.Keys), c.SpamReports)
	}
	for i, r := range res {
		if i != 101 && !r.Created {
			t.Errorf("report %d: %+v", i, r)
		}
	}
	verifyClean(t, s)
}
