package eval

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/store"
)

// ReportersOptions configure RunReporters.
type ReportersOptions struct {
	// Reporters is the number of distinct users who report every spam
	// message. Default 3.
	Reporters int
	// Accuracy carries the engine options, lexicon, model, workers, temp
	// folder and log.
	Accuracy AccuracyOptions
}

// ReportersResult is the outcome of the all-spam-reported protocol.
type ReportersResult struct {
	Corpus    string `json:"corpus"`
	Reporters int    `json:"reporters"`
	Spam      int    `json:"spam"`
	Ham       int    `json:"ham"`
	// Actions counts the checked messages by class and action
	// ("ham/accept", "spam/reject", ...).
	Actions map[string]int `json:"actions"`
	// FlaggedHam lists the ham not accepted, with the verdict's rule.
	FlaggedHam []FlaggedHam `json:"flagged_ham"`
	Elapsed    string       `json:"elapsed"`
}

// FlaggedHam is one ham message the engine acted on.
type FlaggedHam struct {
	Path   string `json:"path"`
	Action string `json:"action"`
	Rule   string `json:"rule"`
}

// RunReporters is the protocol of docs/design/methods.md: every spam message
// of the corpus is reported by Reporters users (all spam by the first user,
// then by the second, ...) into a fresh Badger store, then every message is
// checked (Evaluate: no hit is counted).
func RunReporters(ctx context.Context, c *Corpus, opts ReportersOptions) (*ReportersResult, error) {
	start := time.Now()
	ao := opts.Accuracy
	if err := ao.defaults(); err != nil {
		return nil, err
	}
	if opts.Reporters <= 0 {
		opts.Reporters = 3
	}
	res := &ReportersResult{Corpus: c.Dir, Reporters: opts.Reporters, Spam: c.Count(Spam), Ham: c.Count(Ham), Actions: map[string]int{}}
	dir, err := os.MkdirTemp(ao.TempDir, "nddmilter-eval-reporters-")
	if err != nil {
		return nil, fmt.Errorf("temp store: %w", err)
	}
	defer os.RemoveAll(dir)
	st, err := store.Open(dir, store.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	model := ao.Model
	if ao.Engine.DisableANDD {
		model = nil
	}
	eng, err := campaign.New(st, ao.Lexicon, model, ao.Engine, nil)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	for r := range opts.Reporters {
		ao.Log.Info("reporting all spam", "reporter", r+1)
		for i := range c.Docs {
			if c.Docs[i].Class != Spam {
				continue
			}
			if _, err := eng.Ingester.Report(ctx, c.Docs[i].Raw, store.KindSpam, fmt.Sprintf("u%d@eval.example", r+1)); err != nil {
				return nil, fmt.Errorf("report %s: %w", c.Docs[i].Path, err)
			}
		}
	}
	ao.Log.Info("checking every message")
	verdicts := make([]campaign.Verdict, len(c.Docs))
	var mu sync.Mutex
	var firstErr error
	parallel(len(c.Docs), ao.Workers, func(i int) {
		v, err := eng.Checker.Evaluate(ctx, c.Docs[i].Raw)
		if err != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = fmt.Errorf("check %s: %w", c.Docs[i].Path, err)
			}
			mu.Unlock()
		}
		verdicts[i] = v
	})
	if firstErr != nil {
		return nil, firstErr
	}
	for i, v := range verdicts {
		d := &c.Docs[i]
		res.Actions[d.Class.String()+"/"+v.Action.String()]++
		if d.Class == Ham && v.Action != action.Accept {
			res.FlaggedHam = append(res.FlaggedHam, FlaggedHam{Path: d.Path, Action: v.Action.String(), Rule: v.Rule})
		}
	}
	sort.Slice(res.FlaggedHam, func(a, b int) bool { return res.FlaggedHam[a].Path < res.FlaggedHam[b].Path })
	res.Elapsed = time.Since(start).Round(time.Second).String()
	return res, nil
}

// WriteMarkdown prints the actions table and the flagged ham.
func (r *ReportersResult) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "Every spam message (%d) reported by %d users into a fresh store, then every message checked (a dry run: `Evaluate`):\n\n", r.Spam, r.Reporters)
	fmt.Fprintln(w, "| class | accept | tag | quarantine | reject |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: |")
	for _, cl := range []struct {
		key  string
		name string
		n    int
	}{{"ham", "ham", r.Ham}, {"spam", "the reported spam", r.Spam}} {
		fmt.Fprintf(w, "| %s (%d) |", cl.name, cl.n)
		for _, a := range []action.Action{action.Accept, action.Tag, action.Quarantine, action.Reject} {
			fmt.Fprintf(w, " %d |", r.Actions[cl.key+"/"+a.String()])
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	if len(r.FlaggedHam) == 0 {
		fmt.Fprintf(w, "No ham flagged. Run time: %s.\n", r.Elapsed)
		return
	}
	fmt.Fprintln(w, "Ham flagged:")
	fmt.Fprintln(w)
	for _, f := range r.FlaggedHam {
		fmt.Fprintf(w, "- `%s`: %s (%s)\n", f.Path, f.Action, strings.ReplaceAll(f.Rule, "|", "/"))
	}
	fmt.Fprintf(w, "\nRun time: %s.\n", r.Elapsed)
}
