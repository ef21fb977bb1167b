package eval

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/store"
)

// ConfirmedOptions configure RunConfirmed. Zero values select the
// defaults.
type ConfirmedOptions struct {
	// Reporters is the number of distinct users reporting each message.
	// Default 5.
	Reporters int
	// Similarity is the estimated similarity from which a copy must reach
	// quarantine. Default 0.8.
	Similarity float64
	// Seed, ReportShare, Kinds and Strengths are the adversarial table's
	// (defaults 1, 0.1, every kind, 0.05–0.3).
	Seed        uint64
	ReportShare float64
	Kinds       []spamgen.Kind
	Strengths   []float64
	Accuracy    AccuracyOptions
}

// ConfirmedRow counts the copies of one kind.
type ConfirmedRow struct {
	Kind spamgen.Kind `json:"kind"`
	// Copies checked; Close those whose estimated similarity (the larger
	// of the ANDD and q-gram estimates of the verdict's match) reaches
	// Similarity; by action.
	Copies      int            `json:"copies"`
	Close       int            `json:"close"`
	CloseAction map[string]int `json:"close_action"`
	Actions     map[string]int `json:"actions"`
}

// ConfirmedResult is the outcome of RunConfirmed.
type ConfirmedResult struct {
	Seed       uint64         `json:"seed"`
	Reported   int            `json:"reported"`
	Reporters  int            `json:"reporters"`
	Similarity float64        `json:"similarity"`
	Rows       []ConfirmedRow `json:"rows"`
	Elapsed    string         `json:"elapsed"`
}

// CloseQuarantined is the share of the close copies (all kinds) that were
// quarantined or rejected.
func (r *ConfirmedResult) CloseQuarantined() (n, of int) {
	for _, row := range r.Rows {
		of += row.Close
		n += row.CloseAction[action.Quarantine.String()] + row.CloseAction[action.Reject.String()]
	}
	return n, of
}

// RunConfirmed measures the copies of confirmed campaigns: the reported
// share of the usable spam is reported by Reporters users each (no
// not-spam report) into a fresh store, then spamgen copies of every
// reported message (each kind and strength) are checked; the copies whose
// estimated similarity with the campaign reaches Similarity should be
// quarantined or rejected.
func RunConfirmed(ctx context.Context, c *Corpus, o ConfirmedOptions) (*ConfirmedResult, error) {
	start := time.Now()
	ao := o.Accuracy
	if err := ao.defaults(); err != nil {
		return nil, err
	}
	if o.Reporters <= 0 {
		o.Reporters = 5
	}
	if o.Similarity <= 0 {
		o.Similarity = 0.8
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.ReportShare <= 0 || o.ReportShare > 1 {
		o.ReportShare = 0.1
	}
	if len(o.Kinds) == 0 {
		o.Kinds = spamgen.AllKinds()
	}
	if len(o.Strengths) == 0 {
		o.Strengths = []float64{0.05, 0.1, 0.2, 0.3}
	}
	e, err := reportedSplit(c, o.Seed, o.ReportShare)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(ao.TempDir, "nddmilter-confirmed-")
	if err != nil {
		return nil, fmt.Errorf("temp store: %w", err)
	}
	defer os.RemoveAll(dir)
	st, err := store.Open(dir, store.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	eng, err := campaign.New(st, ao.Lexicon, ao.Model, ao.Engine, nil)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	for r := range o.Reporters {
		for _, q := range e.queries {
			if _, err := eng.Ingester.Report(ctx, c.Docs[q].Raw, store.KindSpam, fmt.Sprintf("user%d@eval.example", r)); err != nil {
				return nil, fmt.Errorf("report %s: %w", c.Docs[q].Path, err)
			}
		}
	}
	words, paras := legitText(c)
	res := &ConfirmedResult{Seed: o.Seed, Reported: len(e.queries), Reporters: o.Reporters, Similarity: o.Similarity}
	for _, k := range o.Kinds {
		row := ConfirmedRow{Kind: k, CloseAction: map[string]int{}, Actions: map[string]int{}}
		type job struct {
			q int
			s float64
		}
		var jobs []job
		for _, q := range e.queries {
			for _, s := range o.Strengths {
				jobs = append(jobs, job{q, s})
			}
		}
		var mu sync.Mutex
		var firstErr error
		parallel(len(jobs), ao.Workers, func(i int) {
			j := jobs[i]
			raw, err := spamgen.Mutate(c.Docs[j.q].Raw, spamgen.Options{Kinds: []spamgen.Kind{k}, Strength: j.s,
				Seed: copySeed(o.Seed, c.Docs[j.q].Path, k, j.s, 0), Words: words, Paragraphs: paras})
			if err != nil {
				return
			}
			v, err := eng.Checker.Evaluate(ctx, raw)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			row.Copies++
			row.Actions[v.Action.String()]++
			if d := v.Decision; d != nil && max(d.ANDD, d.QGram) >= o.Similarity {
				row.Close++
				row.CloseAction[v.Action.String()]++
			}
		})
		if firstErr != nil {
			return nil, firstErr
		}
		res.Rows = append(res.Rows, row)
	}
	res.Elapsed = time.Since(start).Round(time.Second).String()
	return res, nil
}

// WriteMarkdown prints the confirmed-campaign table.
func (r *ConfirmedResult) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "Seed %d: %d spam reported by %d users each (no not-spam report: confirmed campaigns); spamgen copies of each at strengths 0.05–0.3 checked. Close copies: the verdict's estimated similarity (the larger of the ANDD and q-gram estimates) is at least %.2f; they should be quarantined or rejected.\n\n", r.Seed, r.Reported, r.Reporters, r.Similarity)
	fmt.Fprintln(w, "| kind | copies | accept | tag | quarantine | reject | close copies | close quarantined or rejected |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, row := range r.Rows {
		qr := row.CloseAction[action.Quarantine.String()] + row.CloseAction[action.Reject.String()]
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %d | %s |\n", row.Kind, row.Copies, row.Actions["accept"], row.Actions["tag"],
			row.Actions["quarantine"], row.Actions["reject"], row.Close, pct(float64(qr), float64(row.Close)))
	}
	n, of := r.CloseQuarantined()
	fmt.Fprintf(w, "\nAll kinds: %d of %d close copies quarantined or rejected. Run time: %s.\n", n, of, r.Elapsed)
}
