package campaign

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/store"
)

// stopAfter is a context whose Err turns context.Canceled after n calls:
// applying stops there, as a node killed there would.
type stopAfter struct {
	context.Context
	n *int
}

func (c stopAfter) Err() error {
	if *c.n--; *c.n < 0 {
		return context.Canceled
	}
	return nil
}

// applyEvent applies reqs as the report event seq of a fleet's stream,
// from progress p, as internal/fleet does: rounds (store.Round) until
// every report is applied or failed.
func applyEvent(ctx context.Context, e *Engine, seq uint64, p store.Progress, reqs []ReportRequest) error {
	if p.Seq != seq || !p.Partial {
		p = store.Progress{Seq: seq, Partial: true}
	}
	r := &store.Round{Progress: p, Total: len(reqs)}
	o := ApplyOptions{Seq: seq, Time: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC), Round: r}
	for step, rounds := r.Step, 0; step < len(reqs); rounds++ {
		if rounds > 10*len(reqs) {
			return errors.New("no progress")
		}
		r.Step = step
		got, err := e.Ingester.ApplyReports(ctx, o, reqs[step:])
		step += len(got)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return err
			}
			step++
		}
	}
	return nil
}

// A report event of a fleet, killed between any two of its transactions,
// resumes from the store's progress and ends in the state of an
// uninterrupted run: the reports left are matched against the store as
// the committed ones left it, in both runs.
func TestReportEventResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("applies a large event many times")
	}
	var reqs []ReportRequest
	for i := range 4 {
		for _, r := range streamCorpus(t, i == 2) {
			r.Reporter = fmt.Sprint(r.Reporter, "-", i)
			reqs = append(reqs, r)
		}
	}
	ev := newFixture(t, Options{})
	evs, err := ev.eng.Ingester.Evidence(ev.ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range reqs {
		reqs[i].Evidence, reqs[i].Raw = evs[i], nil
	}
	open := func(dir string) (*Engine, *store.Badger) {
		st, err := store.Open(dir, store.Options{NoSyncWrites: true, Expiry: -1})
		if err != nil {
			t.Fatal(err)
		}
		lex, mod := resources(t)
		e, err := New(st, lex, mod, Options{CacheTTL: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return e, st
	}
	const seq = 3
	e, st := open(filepath.Join(t.TempDir(), "ref"))
	calls := 1 << 30
	if err := applyEvent(stopAfter{context.Background(), &calls}, e, seq, store.Progress{}, reqs); err != nil {
		t.Fatal(err)
	}
	stops := 1<<30 - calls
	want, err := st.StateHash(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	partial := 0
	for k := 1; k <= 8; k++ {
		dir := filepath.Join(t.TempDir(), fmt.Sprint(k))
		e, st := open(dir)
		n := k * stops / 9
		if err := applyEvent(stopAfter{context.Background(), &n}, e, seq, store.Progress{}, reqs); !errors.Is(err, context.Canceled) {
			t.Fatalf("stop %d: %v", k, err)
		}
		st.Close() // killed
		e, st = open(dir)
		p, err := st.AppliedProgress(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if p.Partial && p.Step > 0 {
			partial++
		}
		if err := applyEvent(context.Background(), e, seq, p, reqs); err != nil {
			t.Fatalf("stop %d: resume from %+v: %v", k, p, err)
		}
		if got, err := st.StateHash(context.Background()); err != nil || got != want {
			t.Errorf("stop %d of %d (progress %+v): state hash %.12s, want %.12s (%v)", k*stops/9, stops, p, got, want, err)
		}
		st.Close()
	}
	if partial == 0 {
		t.Errorf("no stop fell between two transactions of the event (%d reports)", len(reqs))
	}
}
