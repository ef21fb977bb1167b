package store

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// msg is a report of one message (its digest d) by rep.
func msg(kind Kind, rep, d string, ks ...string) ReportInput {
	in := ReportInput{Time: t0, Kind: kind, Reporter: rep, Keys: keys(ks...), Digest: []byte(d)}
	if kind == KindSpam {
		in.Create, in.Index = true, true
	}
	return in
}

func TestMessageReports(t *testing.T) {
	type counts struct{ spam, spamReporters, ham, hamReporters int64 }
	tests := []struct {
		name    string
		reports []ReportInput
		// last is what the last report did.
		dup, withdrawn, repeated bool
		want                     counts
	}{
		{
			name:    "copy then flag: one message counted once",
			reports: []ReportInput{msg(KindSpam, "alice", "m1", "a"), msg(KindSpam, "alice", "m1", "a")},
			dup:     true, repeated: true,
			want: counts{spam: 1, spamReporters: 1},
		},
		{
			name:    "repeat move three times",
			reports: []ReportInput{msg(KindSpam, "alice", "m1", "a"), msg(KindSpam, "alice", "m1", "a"), msg(KindSpam, "alice", "m1", "a")},
			dup:     true, repeated: true,
			want: counts{spam: 1, spamReporters: 1},
		},
		{
			name:     "another message of the campaign by the same reporter",
			reports:  []ReportInput{msg(KindSpam, "alice", "m1", "a"), msg(KindSpam, "alice", "m2", "a")},
			repeated: true,
			want:     counts{spam: 2, spamReporters: 1},
		},
		{
			name:    "same message by another reporter",
			reports: []ReportInput{msg(KindSpam, "alice", "m1", "a"), msg(KindSpam, "bob", "m1", "a")},
			want:    counts{spam: 2, spamReporters: 2},
		},
		{
			name:      "out of Junk withdraws the spam vote",
			reports:   []ReportInput{msg(KindSpam, "alice", "m1", "a"), msg(KindHam, "alice", "m1", "a")},
			withdrawn: true,
			want:      counts{ham: 1, hamReporters: 1},
		},
		{
			name: "out of Junk keeps the others' votes",
			reports: []ReportInput{msg(KindSpam, "alice", "m1", "a"), msg(KindSpam, "bob", "m1", "a"),
				msg(KindHam, "alice", "m1", "a")},
			withdrawn: true,
			want:      counts{spam: 1, spamReporters: 1, ham: 1, hamReporters: 1},
		},
		{
			name: "back into Junk withdraws the not-spam vote",
			reports: []ReportInput{msg(KindSpam, "alice", "m1", "a"), msg(KindHam, "alice", "m1", "a"),
				msg(KindSpam, "alice", "m1", "a")},
			withdrawn: true,
			want:      counts{spam: 1, spamReporters: 1},
		},
		{
			name: "not spam twice counts once",
			reports: []ReportInput{msg(KindSpam, "bob", "m1", "a"), msg(KindHam, "alice", "m1", "a"),
				msg(KindHam, "alice", "m1", "a")},
			dup: true, repeated: true,
			want: counts{spam: 1, spamReporters: 1, ham: 1, hamReporters: 1},
		},
		{
			name:    "not spam by a user who never reported it as spam withdraws nothing",
			reports: []ReportInput{msg(KindSpam, "bob", "m1", "a"), msg(KindHam, "alice", "m1", "a")},
			want:    counts{spam: 1, spamReporters: 1, ham: 1, hamReporters: 1},
		},
		{
			name:     "no digest: every report counts, as before",
			reports:  []ReportInput{msg(KindSpam, "alice", "", "a"), msg(KindSpam, "alice", "", "a")},
			repeated: true,
			want:     counts{spam: 2, spamReporters: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t, "", Options{})
			var last ReportResult
			var id CampaignID
			for i, in := range tc.reports {
				last = mustReport(t, s, in)
				if i == 0 {
					id = last.Campaign
				}
			}
			if last.Duplicate != tc.dup || last.Withdrawn != tc.withdrawn || last.Repeated != tc.repeated {
				t.Errorf("last report: %+v, want duplicate %v withdrawn %v repeated %v", last, tc.dup, tc.withdrawn, tc.repeated)
			}
			if last.Campaign != id {
				t.Errorf("last report on campaign %d, want %d", last.Campaign, id)
			}
			c := mustGet(t, s, id)
			got := counts{c.SpamReports, c.SpamReporters, c.HamReports, c.HamReporters}
			if got != tc.want {
				t.Errorf("counts %+v, want %+v", got, tc.want)
			}
			verifyClean(t, s)
		})
	}
}

// A duplicate in the same batch transaction counts once too.
func TestMessageReportsBatch(t *testing.T) {
	s := openTest(t, "", Options{})
	res, err := s.ReportBatch(ctx, []ReportInput{
		msg(KindSpam, "alice", "m1", "a"), msg(KindSpam, "alice", "m1", "a"), msg(KindSpam, "bob", "m1", "a"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Duplicate || !res[1].Duplicate || res[2].Duplicate {
		t.Fatalf("results %+v", res)
	}
	c := mustGet(t, s, res[0].Campaign)
	if c.SpamReports != 2 || c.SpamReporters != 2 {
		t.Errorf("counts: %d reports, %d reporters", c.SpamReports, c.SpamReporters)
	}
}

// A campaign deleted since the first report: the repeat is a new report.
func TestMessageReportAfterDelete(t *testing.T) {
	s := openTest(t, "", Options{})
	first := mustReport(t, s, msg(KindSpam, "alice", "m1", "a"))
	if err := s.Delete(ctx, first.Campaign); err != nil {
		t.Fatal(err)
	}
	again := mustReport(t, s, msg(KindSpam, "alice", "m1", "a"))
	if again.Duplicate || !again.Created {
		t.Fatalf("after delete: %+v", again)
	}
}

func TestMessageReportDigestTooLong(t *testing.T) {
	s := openTest(t, "", Options{})
	_, err := s.Report(ctx, msg(KindSpam, "alice", string(bytes.Repeat([]byte("x"), MaxDigestLen+1)), "a"))
	if !errors.Is(err, ErrDigestTooLong) {
		t.Fatalf("err = %v, want ErrDigestTooLong", err)
	}
}

// The entries expire with the store's Expiry.
func TestMessageReportTTL(t *testing.T) {
	s := openTest(t, "", Options{Expiry: time.Hour})
	mustReport(t, s, msg(KindSpam, "alice", "m1", "a"))
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	item, err := txn.Get(msgReportKey(reporterHash("alice"), []byte("m1")))
	if err != nil {
		t.Fatal(err)
	}
	if exp := time.Unix(int64(item.ExpiresAt()), 0); exp.Before(time.Now().Add(50*time.Minute)) || exp.After(time.Now().Add(70*time.Minute)) {
		t.Errorf("expires at %v, want in about an hour", exp)
	}
}
