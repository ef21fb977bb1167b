package campaign

import (
	"fmt"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/store"
)

func TestNormalizeReporter(t *testing.T) {
	tests := []struct {
		id, realm, want string
	}{
		{"mallory", "", "mallory"},
		{"Mallory", "", "mallory"},
		{"MALLORY", "", "mallory"},
		{"  mallory\t", "", "mallory"},
		{"mallory@example.org", "", "mallory@example.org"},
		{"mallory@example.org", "example.org", "mallory"},
		{"Mallory@Example.ORG", "example.org", "mallory"},
		{"mallory@example.org", "@Example.org ", "mallory"},
		{"mallory@other.example", "example.org", "mallory@other.example"},
		{"mallory@sub.example.org", "example.org", "mallory@sub.example.org"},
		{"mallory@example.org@example.org", "example.org", "mallory"},
		{"@example.org", "example.org", "@example.org"},
		{"ｍａｌｌｏｒｙ", "", "mallory"}, // fullwidth letters (NFKC)
		{"Ⅿallory", "", "mallory"}, // U+216F ROMAN NUMERAL ONE THOUSAND
		{"fbl:BigISP", "example.org", "fbl:bigisp"},
		{"", "example.org", ""},
		{"   ", "", ""},
		{"Élodie", "", "élodie"},
		{"E\u0301lodie", "", "élodie"}, // decomposed: NFKC composes it
	}
	for _, tt := range tests {
		got := NormalizeReporter(tt.id, tt.realm)
		if got != tt.want {
			t.Errorf("NormalizeReporter(%q, %q) = %q, want %q", tt.id, tt.realm, got, tt.want)
		}
		if again := NormalizeReporter(got, tt.realm); again != got {
			t.Errorf("not idempotent: %q → %q → %q", tt.id, got, again)
		}
	}
}

// Red-team finding 8: the spellings of one account count as one reporter,
// through Report (every daemon entry), ReportBatch and a ReportStream (the
// command line); a replicated report is stored as its origin named it.
func TestReporterSpellingsCountOnce(t *testing.T) {
	spellings := []string{"mallory", "Mallory", "MALLORY", "mallory@example.org", " Mallory@EXAMPLE.org "}
	t.Run("Report", func(t *testing.T) {
		f := newFixture(t, Options{ReporterRealm: "example.org"})
		var id store.CampaignID
		for i, who := range spellings {
			id = f.report(t, copyOf(t, 0, uint64(i+1)), store.KindSpam, who).Campaign
		}
		assertReporters(t, f, id, 1, "mallory")
	})
	t.Run("ReportStream", func(t *testing.T) {
		f := newFixture(t, Options{ReporterRealm: "example.org"})
		var id store.CampaignID
		s := f.eng.Ingester.NewReportStream(f.ctx, StreamOptions{Batch: 2}, func(r StreamResult) {
			if r.Err != nil {
				t.Errorf("report %d: %v", r.Seq, r.Err)
			}
			id = r.Outcome.Campaign
		})
		for i, who := range spellings {
			if err := s.Add(ReportRequest{Raw: copyOf(t, 0, uint64(i+1)), Kind: store.KindSpam, Reporter: who}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		assertReporters(t, f, id, 1, "mallory")
	})
	t.Run("no realm", func(t *testing.T) {
		f := newFixture(t, Options{})
		var id store.CampaignID
		for i, who := range spellings {
			id = f.report(t, copyOf(t, 0, uint64(i+1)), store.KindSpam, who).Campaign
		}
		assertReporters(t, f, id, 2, "mallory", "mallory@example.org")
	})
	t.Run("replicated", func(t *testing.T) {
		f := newFixture(t, Options{ReporterRealm: "example.org"})
		applied := ApplyOptions{Seq: 1, Time: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
		outs, err := f.eng.Ingester.ApplyReports(f.ctx, applied, []ReportRequest{{Raw: copyOf(t, 0, 1), Kind: store.KindSpam, Reporter: "Mallory@example.org"}})
		if err != nil {
			t.Fatal(err)
		}
		assertReporters(t, f, outs[0].Campaign, 1, "Mallory@example.org")
	})
}

// assertReporters checks that campaign id has n spam reporters, the hashes
// of ids.
func assertReporters(t *testing.T, f *fixture, id store.CampaignID, n int, ids ...string) {
	t.Helper()
	reps, err := f.st.Reporters(f.ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64]bool{}
	for _, r := range reps {
		got[r.Hash] = true
	}
	if len(reps) != n {
		t.Errorf("campaign %d: %d reporters, want %d", id, len(reps), n)
	}
	for _, who := range ids {
		if !got[store.ReporterHash(who)] {
			t.Errorf("campaign %d: reporter %q not among %v", id, who, fmt.Sprint(reps))
		}
	}
}
