package campaign

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/store"
)

// Red-team finding 9: one name's reports are bounded (a token bucket per
// normalized reporter id) where every entry ends, ReportBatch; a reporter
// over it gets ErrRateLimited with a retry time and nothing is stored.
func TestReporterLimit(t *testing.T) {
	f := newFixture(t, Options{ReporterRealm: "example.org"})
	lim := NewReporterLimiter(ReporterLimit{PerHour: 3600, Burst: 5}, f.clock.Now)
	f.eng.Ingester.SetReporterLimiter(lim)
	spellings := []string{"mallory", "Mallory", "MALLORY", "mallory@example.org", " mallory "}
	var limited int
	for i := range 12 {
		_, err := f.eng.Ingester.Report(f.ctx, copyOf(t, i%len(campaignTexts), uint64(i+1)), store.KindSpam, spellings[i%len(spellings)])
		var rle *RateLimitError
		switch {
		case err == nil && i < 5:
		case i >= 5 && errors.As(err, &rle) && errors.Is(err, ErrRateLimited):
			limited++
			if rle.Reporter != "mallory" || rle.RetryAfter < time.Second || rle.RetryAfter > 2*time.Second {
				t.Errorf("report %d: %+v", i, rle)
			}
		default:
			t.Fatalf("report %d: %v", i, err)
		}
	}
	if limited != 7 {
		t.Errorf("%d reports limited, want 7", limited)
	}
	cs, err := f.eng.Reader.List(f.ctx, store.Query{})
	if err != nil {
		t.Fatal(err)
	}
	var reports int64
	for _, c := range cs {
		reports += c.SpamReports
	}
	if reports != 5 {
		t.Errorf("%d reports stored, want 5", reports)
	}
	// Another reporter is not held by mallory's bucket.
	if _, err := f.eng.Ingester.Report(f.ctx, copyOf(t, 0, 99), store.KindSpam, "alice"); err != nil {
		t.Errorf("alice: %v", err)
	}
	// A second later mallory has one report again.
	f.clock.Add(time.Second)
	if _, err := f.eng.Ingester.Report(f.ctx, copyOf(t, 1, 99), store.KindSpam, "mallory"); err != nil {
		t.Errorf("mallory a second later: %v", err)
	}
	if _, err := f.eng.Ingester.Report(f.ctx, copyOf(t, 2, 99), store.KindSpam, "mallory"); !errors.Is(err, ErrRateLimited) {
		t.Errorf("mallory again: %v, want ErrRateLimited", err)
	}
	// The administrator is not limited.
	if _, err := f.eng.Ingester.Report(WithoutReporterLimit(f.ctx), copyOf(t, 0, 98), store.KindSpam, "mallory"); err != nil {
		t.Errorf("the administrator reporting as mallory: %v", err)
	}
	// A batch is admitted whole or not at all.
	f.clock.Add(2 * time.Second)
	reqs := []ReportRequest{
		{Raw: copyOf(t, 0, 200), Kind: store.KindSpam, Reporter: "mallory"},
		{Raw: copyOf(t, 1, 200), Kind: store.KindSpam, Reporter: "mallory"},
		{Raw: copyOf(t, 2, 200), Kind: store.KindSpam, Reporter: "mallory"},
	}
	if outs, err := f.eng.Ingester.ReportBatch(f.ctx, reqs); !errors.Is(err, ErrRateLimited) || len(outs) != 0 {
		t.Errorf("batch of 3 with 2 tokens: %d outcomes, %v", len(outs), err)
	}
	if _, err := f.eng.Ingester.ReportBatch(f.ctx, reqs[:2]); err != nil {
		t.Errorf("batch of 2 with 2 tokens: %v", err)
	}
	// A fleet's replicated report was limited at its origin.
	applied := ApplyOptions{Seq: 1, Time: f.clock.Now()}
	if _, err := f.eng.Ingester.ApplyReports(f.ctx, applied, reqs[2:]); err != nil {
		t.Errorf("replicated report: %v", err)
	}
	// The command line's stream is not limited.
	s := f.eng.Ingester.NewReportStream(f.ctx, StreamOptions{}, func(r StreamResult) {
		if r.Err != nil {
			t.Errorf("stream report %d: %v", r.Seq, r.Err)
		}
	})
	for i := range 3 {
		if err := s.Add(ReportRequest{Raw: copyOf(t, i, 300), Kind: store.KindSpam, Reporter: "mallory"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestReporterLimiterBounded(t *testing.T) {
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	lim := NewReporterLimiter(ReporterLimit{PerHour: 3600, Burst: 2, MaxReporters: 10}, func() time.Time { return now })
	for i := range 100 {
		if err := lim.admit(map[string]int{fmt.Sprint("r", i): 1}); err != nil {
			t.Fatalf("reporter %d: %v", i, err)
		}
	}
	if n := lim.tracked(); n > 10 {
		t.Errorf("%d reporters tracked, at most 10", n)
	}
	// More at once than the burst never fits.
	var rle *RateLimitError
	if err := lim.admit(map[string]int{"big": 3}); !errors.As(err, &rle) || rle.RetryAfter < time.Second {
		t.Errorf("3 at once with burst 2: %v", err)
	}
	// Disabled.
	lim.SetLimit(ReporterLimit{PerHour: -1})
	for i := range 10 {
		if err := lim.admit(map[string]int{"x": 1}); err != nil {
			t.Fatalf("disabled limit, report %d: %v", i, err)
		}
	}
}
