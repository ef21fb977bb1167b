package campaign

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/store"
)

// streamCorpus is a report sequence that exercises every outcome: new
// campaigns, joins, merges of campaigns created apart, repeated reporters,
// skipped messages, ARF reports, not-spam reports that revoke, the
// internal/mime samples, and (with badKind) a report that fails.
func streamCorpus(t testing.TB, badKind bool) []ReportRequest {
	t.Helper()
	// Two campaigns started apart that the last report merges
	// (mergeTrio); within one batch, the report joins one of them.
	ma, mb, mc := mergeTrio(t)
	reqs := []ReportRequest{{Raw: ma, Kind: store.KindSpam, Reporter: "m1"}, {Raw: mb, Kind: store.KindSpam, Reporter: "m2"}}
	kinds := spamgen.AllKinds()
	heavy := []spamgen.Kind{spamgen.Typos, spamgen.Combo, spamgen.Delete}
	for i := range 80 {
		// Light copies of every kind join; heavy ones (strength 0.5) start
		// campaigns apart that later copies merge.
		k, strength := kinds[i%len(kinds)], 0.05+0.05*float64(i%4)
		if i%2 == 1 {
			k, strength = heavy[i%len(heavy)], 0.5
		}
		b, err := spamgen.Mutate(baseMessage(i%3), spamgen.Options{Kinds: []spamgen.Kind{k}, Seed: uint64(i), Strength: strength})
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, ReportRequest{Raw: b, Kind: store.KindSpam, Reporter: fmt.Sprint("r", i%7)})
		if i == 20 && badKind {
			reqs = append(reqs, ReportRequest{Raw: b, Kind: 9, Reporter: "bad"})
		}
	}
	samples, err := filepath.Glob(filepath.Join("..", "mime", "testdata", "*.eml"))
	if err != nil || len(samples) == 0 {
		t.Fatalf("mime samples: %v %v", samples, err)
	}
	for i, p := range samples {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, ReportRequest{Raw: b, Kind: store.KindSpam, Reporter: fmt.Sprint("s", i%3)})
	}
	reqs = append(reqs, ReportRequest{Raw: []byte("Subject: hi\r\n\r\nok\r\n"), Kind: store.KindSpam, Reporter: "x"})
	for i := range 4 {
		reqs = append(reqs, ReportRequest{Raw: copyOf(t, 1, uint64(100+i)), Kind: store.KindHam, Reporter: fmt.Sprint("h", i)})
	}
	// The same samples again, as not-spam, by others.
	for i, p := range samples[:len(samples)/2] {
		b, _ := os.ReadFile(p)
		reqs = append(reqs, ReportRequest{Raw: b, Kind: store.KindHam, Reporter: fmt.Sprint("n", i)})
	}
	return append(reqs, ReportRequest{Raw: mc, Kind: store.KindSpam, Reporter: "m3"})
}

// sequential is what a caller of ReportBatch gets: batches of n reports
// and, when a batch stops at a report, the rest of it as the next batch.
func sequential(f *fixture, reqs []ReportRequest, n int) []StreamResult {
	var res []StreamResult
	for start := 0; start < len(reqs); start += n {
		b := reqs[start:min(start+n, len(reqs))]
		seq := start
		for len(b) > 0 {
			outs, err := f.eng.Ingester.ReportBatch(f.ctx, b)
			for _, o := range outs {
				res = append(res, StreamResult{Seq: seq, Outcome: o})
				seq++
			}
			if err == nil || len(outs) >= len(b) {
				break
			}
			res = append(res, StreamResult{Seq: seq, Err: fmt.Errorf("report: %w", errors.Unwrap(err))})
			seq++
			b = b[len(outs)+1:]
		}
	}
	return res
}

func streamed(t *testing.T, f *fixture, reqs []ReportRequest, opts StreamOptions) []StreamResult {
	t.Helper()
	var res []StreamResult
	s := f.eng.Ingester.NewReportStream(f.ctx, opts, func(r StreamResult) { res = append(res, r) })
	for _, r := range reqs {
		if err := s.Add(r); err != nil {
			t.Fatalf("Add: %v", err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return res
}

func TestReportStreamMatchesReportBatch(t *testing.T) {
	tests := []struct {
		opts    StreamOptions
		badKind bool
	}{
		{StreamOptions{Batch: 1, Workers: 1, Ahead: 1}, false},
		{StreamOptions{Batch: 5, Workers: 2}, false},
		{StreamOptions{Batch: 16, Workers: 4, Ahead: 3}, true},
		{StreamOptions{Batch: 256}, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("batch%d-workers%d-ahead%d-bad%v", tt.opts.Batch, tt.opts.Workers, tt.opts.Ahead, tt.badKind), func(t *testing.T) {
			reqs := streamCorpus(t, tt.badKind)
			ref, par := newFixture(t, Options{}), newFixture(t, Options{})
			want := sequential(ref, reqs, tt.opts.Batch)
			got := streamed(t, par, reqs, tt.opts)
			if len(got) != len(reqs) || len(want) != len(reqs) {
				t.Fatalf("%d results streamed, %d sequential, for %d reports", len(got), len(want), len(reqs))
			}
			var created, joined, merged, skipped, revoked, failed int
			for i := range got {
				g, w := got[i], want[i]
				if g.Seq != i || w.Seq != i || !reflect.DeepEqual(g.Outcome, w.Outcome) || (g.Err == nil) != (w.Err == nil) ||
					(g.Err != nil && g.Err.Error() != w.Err.Error()) {
					t.Errorf("report %d:\n streamed   %+v\n sequential %+v", i, g, w)
				}
				o := g.Outcome
				switch {
				case g.Err != nil:
					failed++
				case o.Skipped != "":
					skipped++
				case o.Created:
					created++
				case o.Campaign != 0:
					joined++
				}
				merged += len(o.Merged)
				if o.Revoked {
					revoked++
				}
			}
			t.Logf("created %d, joined %d, merged %d, skipped %d, revoked %d, failed %d", created, joined, merged, skipped, revoked, failed)
			// Reports of one batch never merge campaigns (ReportBatch).
			if created == 0 || joined == 0 || (merged == 0 && tt.opts.Batch < len(reqs)) || skipped == 0 || revoked == 0 || (failed > 0) != tt.badKind {
				t.Errorf("the corpus no longer exercises every outcome")
			}
			// The stores end identical.
			a, err := ref.eng.Reader.List(ref.ctx, store.Query{})
			if err != nil {
				t.Fatal(err)
			}
			b, err := par.eng.Reader.List(par.ctx, store.Query{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Errorf("stores differ: %d campaigns sequentially, %d streamed", len(a), len(b))
			}
		})
	}
}

func TestReportStreamCanceled(t *testing.T) {
	f := newFixture(t, Options{})
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	n := 0
	s := f.eng.Ingester.NewReportStream(ctx, StreamOptions{Batch: 2, Ahead: 1}, func(StreamResult) { n++ })
	reqs := streamCorpus(t, false)
	var addErr error
	for i, r := range reqs {
		if i == 5 {
			cancel()
		}
		if addErr = s.Add(r); addErr != nil {
			break
		}
	}
	err := s.Close()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Close: %v, want context.Canceled", err)
	}
	if addErr != nil && !errors.Is(addErr, context.Canceled) {
		t.Errorf("Add: %v", addErr)
	}
	if n > 6 {
		t.Errorf("%d results after cancel at report 5", n)
	}
	if err := s.Add(reqs[0]); err == nil {
		t.Error("Add after Close: no error")
	}
}

// BenchmarkReportStream compares ReportBatch on consecutive batches with
// the stream, over randomized copies of the test campaigns: b.N reports.
func BenchmarkReportStream(b *testing.B) {
	msgs := make([][]byte, 512)
	for i := range msgs {
		msgs[i] = copyOf(b, i%3, uint64(i), spamgen.Combo)
	}
	b.Run("ReportBatch", func(b *testing.B) {
		f := newFixture(b, Options{})
		batch := make([]ReportRequest, 0, DefaultStreamBatch)
		for i := 0; b.Loop(); i++ {
			batch = append(batch, ReportRequest{Raw: msgs[i%len(msgs)], Kind: store.KindSpam, Reporter: fmt.Sprint(i)})
			if len(batch) == cap(batch) {
				if _, err := f.eng.Ingester.ReportBatch(f.ctx, batch); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
		if _, err := f.eng.Ingester.ReportBatch(f.ctx, batch); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("Stream", func(b *testing.B) {
		f := newFixture(b, Options{})
		s := f.eng.Ingester.NewReportStream(f.ctx, StreamOptions{}, nil)
		for i := 0; b.Loop(); i++ {
			if err := s.Add(ReportRequest{Raw: msgs[i%len(msgs)], Kind: store.KindSpam, Reporter: fmt.Sprint(i)}); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	})
}

// A report ingested from its evidence (Ingester.Evidence, as a fleet's
// events carry it) has the outcome and leaves the store as the raw
// message does.
func TestReportEvidenceMatchesRaw(t *testing.T) {
	for _, opts := range []Options{{}, {ANDDExactCosine: 0.6}} {
		t.Run(fmt.Sprint("exact", opts.ANDDExactCosine), func(t *testing.T) {
			reqs := streamCorpus(t, false)
			ref, ev := newFixture(t, opts), newFixture(t, opts)
			evs, err := ev.eng.Ingester.Evidence(ev.ctx, reqs)
			if err != nil {
				t.Fatal(err)
			}
			signed := make([]ReportRequest, len(reqs))
			for i, r := range reqs {
				signed[i] = ReportRequest{Evidence: evs[i], Kind: r.Kind, Reporter: r.Reporter}
			}
			want, got := sequential(ref, reqs, 16), sequential(ev, signed, 16)
			if !reflect.DeepEqual(got, want) {
				for i := range min(len(got), len(want)) {
					if !reflect.DeepEqual(got[i], want[i]) {
						t.Errorf("report %d:\n evidence %+v\n raw      %+v", i, got[i], want[i])
					}
				}
				t.Fatalf("%d outcomes from evidence, %d from raw messages", len(got), len(want))
			}
			a, err := ref.eng.Reader.List(ref.ctx, store.Query{})
			if err != nil {
				t.Fatal(err)
			}
			b, err := ev.eng.Reader.List(ev.ctx, store.Query{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, b) || len(a) == 0 {
				t.Errorf("stores differ: %d campaigns from raw messages, %d from evidence", len(a), len(b))
			}
			ha, err := ref.st.StateHash(ref.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if hb, err := ev.st.StateHash(ev.ctx); err != nil || ha != hb {
				t.Errorf("state hashes differ: %s from raw messages, %s from evidence (%v)", ha, hb, err)
			}
		})
	}
}
