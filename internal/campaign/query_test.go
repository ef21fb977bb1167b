package campaign

import (
	"errors"
	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/store"
	"testing"
	"time"
)

func TestQueryListGetTimeline(t *testing.T) {
	f := newFixture(t, Options{})
	// Campaign 0 reported by three reporters, campaign 1 by one, an hour later.
	var ids [2]store.CampaignID
	for i, r := range []string{"a", "b", "c"} {
		o := f.report(t, copyOf(t, 0, uint64(i)), store.KindSpam, r)
		ids[0] = o.Campaign
	}
	f.clock.Add(time.Hour)
	ids[1] = f.report(t, copyOf(t, 1, 9), store.KindSpam, "d").Campaign
	if ids[0] == 0 || ids[1] == 0 || ids[0] == ids[1] {
		t.Fatalf("campaigns %v", ids)
	}

	tests := []struct {
		name string
		q    store.Query
		want []store.CampaignID
	}{
		{"recent first", store.Query{}, []store.CampaignID{ids[1], ids[0]}},
		{"by reports", store.Query{Sort: "reports"}, []store.CampaignID{ids[0], ids[1]}},
		{"limit", store.Query{Limit: 1}, []store.CampaignID{ids[1]}},
		{"since", store.Query{Since: f.clock.Now().Add(-30 * time.Minute)}, []store.CampaignID{ids[1]}},
	}
	for _, tt := range tests {
		cs, err := f.eng.Reader.List(f.ctx, tt.q)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		var got []store.CampaignID
		for _, c := range cs {
			got = append(got, c.ID)
		}
		if len(got) != len(tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
				break
			}
		}
	}

	c, err := f.eng.Reader.Get(f.ctx, ids[0])
	if err != nil || c.ID != ids[0] || c.SpamReporters != 3 || c.State != store.StateActive || len(c.Keys) == 0 {
		t.Fatalf("Get: %+v %v", c, err)
	}
	days, err := f.eng.Reader.Timeline(f.ctx, ids[0])
	if err != nil || len(days) != 1 || days[0].SpamReports != 3 {
		t.Errorf("Timeline: %+v %v", days, err)
	}
	if _, err := f.eng.Reader.Get(f.ctx, 999); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(999): %v, want ErrNotFound", err)
	}
}

func TestQueryAllow(t *testing.T) {
	f := newFixture(t, Options{})
	var id store.CampaignID
	for i, r := range []string{"a", "b", "c", "d", "e"} {
		id = f.report(t, copyOf(t, 2, uint64(i)), store.KindSpam, r).Campaign
	}
	if v := f.check(t, baseMessage(2)); v.Action == action.Accept || v.Campaign != id {
		t.Fatalf("before allow: %+v", v)
	}
	tests := []struct {
		allow  bool
		state  store.State
		accept bool
	}{
		{true, store.StateAllowed, true},
		{true, store.StateAllowed, true}, // idempotent
		{false, store.StateActive, false},
	}
	for _, tt := range tests {
		c, err := f.eng.Ingester.Allow(f.ctx, id, tt.allow)
		if err != nil || c.ID != id || c.State != tt.state {
			t.Fatalf("Allow(%v): %+v %v", tt.allow, c, err)
		}
		// The engine's cache sees the change at once.
		if v := f.check(t, baseMessage(2)); (v.Action == action.Accept) != tt.accept {
			t.Errorf("after Allow(%v): %+v", tt.allow, v)
		}
	}
	if _, err := f.eng.Ingester.Allow(f.ctx, 999, true); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Allow(999): %v, want ErrNotFound", err)
	}
}

func TestQueryExactCopy(t *testing.T) {
	f := newFixture(t, Options{})
	var o ReportOutcome
	for i, r := range []string{"a", "b", "c", "d", "e"} {
		o = f.report(t, copyOf(t, 0, uint64(i)), store.KindSpam, r)
	}
	c, err := f.eng.Reader.Get(f.ctx, o.Campaign)
	if err != nil {
		t.Fatal(err)
	}
	// An exact copy decides as a checked message matching every bag does.
	d := f.eng.Reader.ExactCopy(c)
	v := f.check(t, baseMessage(0))
	if d.Action != v.Action || d.Rule == "" {
		t.Errorf("ExactCopy: %+v; check of the original: %+v", d, v)
	}
	one := &store.Campaign{ID: 1, SpamReports: 1, SpamReporters: 1}
	if d := f.eng.Reader.ExactCopy(one); d.Action >= v.Action {
		t.Errorf("ExactCopy of a one-reporter campaign: %+v, want less than %v", d, v.Action)
	}
}

// The now view ranks campaigns by the last hour's matches with their
// sparklines and shows the hourly totals and store counts; Series is a
// campaign's hourly timeline; the false-positive watch lists campaigns
// with not-spam reports.
func TestNowSeriesAndWatch(t *testing.T) {
	f := newFixture(t, Options{})
	var ids [2]store.CampaignID
	for i, r := range []string{"a", "b", "c"} {
		ids[0] = f.report(t, copyOf(t, 0, uint64(i)), store.KindSpam, r).Campaign
	}
	ids[1] = f.report(t, copyOf(t, 1, 9), store.KindSpam, "d").Campaign
	f.clock.Add(30 * time.Minute)
	for i := range 3 {
		if v := f.check(t, copyOf(t, 0, uint64(100+i))); v.Campaign != ids[0] {
			t.Fatalf("copy %d: %+v", i, v)
		}
	}
	for i := range 2 {
		if v := f.check(t, legitMessage(i)); v.Campaign != 0 {
			t.Fatalf("legit %d: %+v", i, v)
		}
	}
	f.report(t, copyOf(t, 1, 10), store.KindHam, "e")
	if err := f.st.FlushHits(f.ctx); err != nil {
		t.Fatal(err)
	}

	v, err := f.eng.Reader.Now(f.ctx, NowQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Campaigns) != 1 || v.Campaigns[0].ID != ids[0] || v.Campaigns[0].HourMessages != 3 {
		t.Fatalf("Now campaigns: %+v", v.Campaigns)
	}
	sp := v.Campaigns[0].Series
	if len(sp) != 24 || sp[23].Messages != 3 || sp[23].Acted != 3 || sp[23].SpamReports != 3 {
		t.Errorf("sparkline: %+v", sp)
	}
	last := v.Totals[len(v.Totals)-1]
	if len(v.Totals) != 24 || last.Checked != 5 || last.Matched != 3 || last.Actions["accept"] != 2 || last.SpamReports != 4 || last.HamReports != 1 {
		t.Errorf("totals: %d hours, last %+v", len(v.Totals), last)
	}
	if v.Stats.Campaigns != 2 || v.Stats.Messages != 3 || v.Stats.HamReports != 1 {
		t.Errorf("stats: %+v", v.Stats)
	}
	if _, err := f.eng.Reader.Now(f.ctx, NowQuery{Sort: "size"}); err == nil {
		t.Error("Now accepted an unknown sort")
	}

	hs, err := f.eng.Reader.Series(f.ctx, ids[0])
	if err != nil || len(hs) != 1 || hs[0].Messages != 3 {
		t.Errorf("Series: %+v %v", hs, err)
	}
	if _, err := f.eng.Reader.Series(f.ctx, 999999); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Series of a missing campaign: %v", err)
	}
	w, err := f.eng.Reader.FalsePositiveWatch(f.ctx, WatchOptions{Limit: 10})
	if err != nil || len(w) != 1 || w[0].ID != ids[1] || w[0].HamReporters != 1 {
		t.Errorf("FalsePositiveWatch: %+v %v", w, err)
	}
}
