package store

import (
	"context"
	"slices"
	"testing"
	"time"
)

func TestReporters(t *testing.T) {
	b, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var id CampaignID
	for i, r := range []struct {
		who  string
		kind Kind
	}{{"a", KindSpam}, {"b", KindSpam}, {"a", KindSpam}, {"c", KindHam}} {
		in := ReportInput{Time: now, Kind: r.kind, Reporter: r.who, Vetted: true, Target: id}
		if i == 0 {
			in.Keys, in.Create, in.Index = [][]byte{[]byte("k1")}, true, true
		}
		res, err := b.Report(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		id = res.Campaign
	}
	set, err := b.Reporters(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []uint64{reporterHash("a"), reporterHash("b")}
	slices.Sort(want)
	got := slices.Sorted(slices.Values(set.Spam))
	if !slices.Equal(got, want) || !slices.Equal(set.Ham, []uint64{reporterHash("c")}) || set.Truncated {
		t.Errorf("Reporters = %+v, want spam %v, ham [c]", set, want)
	}
	if set, err := b.Reporters(ctx, id, 2); err != nil || !set.Truncated {
		t.Errorf("Reporters(limit 2) = %+v, %v; want truncated", set, err)
	}
	if set, err := b.Reporters(ctx, id, 3); err != nil || set.Truncated || len(set.Spam)+len(set.Ham) != 3 {
		t.Errorf("Reporters(limit 3) = %+v, %v; want all 3", set, err)
	}
}
