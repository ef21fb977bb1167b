package eval

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/lab/spamgen"
	"github.com/nddmilter/nddmilter/internal/lab/spotsigs"
	"github.com/nddmilter/nddmilter/internal/mime"
	"github.com/nddmilter/nddmilter/internal/store"
)

// PaddingOptions configure RunPadding. The zero value selects the
// defaults.
type PaddingOptions struct {
	// SizesKB are the amounts of appended text measured, in KiB. Default
	// 0, 1, 4, 8, 16, 32.
	SizesKB []int
	// Seed selects the reported messages (as in RunAccuracy) and the
	// padding. Default 1.
	Seed uint64
	// ReportShare is the share of the usable spam reported. Default 0.1.
	ReportShare float64
	// Reporters is the number of distinct users reporting each message.
	// Default 5.
	Reporters int
	// Accuracy carries the engine options, lexicon, model, workers, temp
	// dir and logger (only those fields are used).
	Accuracy AccuracyOptions
}

// PadRow is the detection of padded copies at one size with one engine
// configuration.
type PadRow struct {
	Config     string `json:"config"`
	SizeKB     int    `json:"size_kb"`
	Copies     int    `json:"copies"`
	Detected   int    `json:"detected"`
	Tag        int    `json:"tag"`
	Quarantine int    `json:"quarantine"`
	Reject     int    `json:"reject"`
	// ByLead counts the detected copies with a lead key (internal/shortsig).
	ByLead int `json:"by_lead"`
}

// PaddingResult is the outcome of RunPadding.
type PaddingResult struct {
	Corpus   string `json:"corpus"`
	Seed     uint64 `json:"seed"`
	Reported int    `json:"reported"`
	// Reporters is the number of users who reported each message.
	Reporters int      `json:"reporters"`
	Rows      []PadRow `json:"rows"`
	// SpotSigsHamFlagged is the number of ham messages of the corpus for
	// which the SpotSigs rows' index finds a reported message.
	SpotSigsHamFlagged int    `json:"spotsigs_ham_flagged"`
	Elapsed            string `json:"elapsed"`
}

// RunPadding measures the attack of copies padded with random dictionary
// words: a share of the usable spam, rebuilt as plain-text messages from
// its subject and visible text, is reported by Reporters users to the
// engine over a real Badger store; copies with SizesKB KiB of random words
// of the corpus's ham vocabulary appended to the text are then checked,
// with the daemon's defaults and without the short-message keys.
func RunPadding(ctx context.Context, c *Corpus, opts PaddingOptions) (*PaddingResult, error) {
	start := time.Now()
	ao := opts.Accuracy
	if err := ao.defaults(); err != nil {
		return nil, err
	}
	if len(opts.SizesKB) == 0 {
		opts.SizesKB = []int{0, 1, 4, 8, 16, 32}
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	if opts.ReportShare <= 0 || opts.ReportShare > 1 {
		opts.ReportShare = 0.1
	}
	if opts.Reporters <= 0 {
		opts.Reporters = 5
	}
	e, err := reportedSplit(c, opts.Seed, opts.ReportShare)
	if err != nil {
		return nil, err
	}
	words, _ := legitText(c)
	if len(words) == 0 {
		return nil, fmt.Errorf("corpus %s: no ham words to pad with", c.Dir)
	}
	docs := make([]*mime.Document, len(e.queries))
	for i, q := range e.queries {
		docs[i] = mime.Parse(c.Docs[q].Raw, ao.Engine.Mime)
	}
	res := &PaddingResult{Corpus: c.Dir, Seed: opts.Seed, Reported: len(docs), Reporters: opts.Reporters}
	configs := []struct {
		name string
		set  func(*campaign.Options)
	}{
		{"daemon defaults", func(*campaign.Options) {}},
		{"without short-message keys", func(o *campaign.Options) { o.DisableShort = true }},
	}
	for _, cfg := range configs {
		eo := ao.Engine
		cfg.set(&eo)
		rows, err := padRun(ctx, ao, eo, docs, words, opts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.name, err)
		}
		for i := range rows {
			rows[i].Config = cfg.name
		}
		res.Rows = append(res.Rows, rows...)
	}
	rows, ham := padSpotSigs(c, ao, docs, words, opts)
	res.Rows = append(res.Rows, rows...)
	res.SpotSigsHamFlagged = ham
	res.Elapsed = time.Since(start).Round(time.Second).String()
	return res, nil
}

// padSpotSigs measures SpotSigs alone on the same copies: the reported
// messages' spot signatures in its index, a copy detected when the index
// finds its original (weighted Jaccard ≥ the paper's best τ); and the ham
// of the corpus it finds any reported message for.
func padSpotSigs(c *Corpus, ao AccuracyOptions, docs []*mime.Document, words []string, opts PaddingOptions) (rows []PadRow, hamFlagged int) {
	ex := spotsigs.NewExtractor(spotsigs.Options{})
	x := spotsigs.NewIndex(spotsigs.MatchOptions{})
	for i, d := range docs {
		x.Add(i, ex.Extract(wordTokens(spamgen.NewMessage(d.Subject, d.Text, false), ao)))
	}
	name := fmt.Sprintf("SpotSigs alone (weighted Jaccard ≥ %.2f)", x.Threshold())
	for _, kb := range opts.SizesKB {
		row := PadRow{Config: name, SizeKB: kb}
		for i, d := range docs {
			text := d.Text
			if kb > 0 {
				text += "\n\n" + padding(words, kb<<10, opts.Seed, uint64(i))
			}
			ms, _ := x.Query(ex.Extract(wordTokens(spamgen.NewMessage(d.Subject, text, false), ao)))
			row.Copies++
			if slices.ContainsFunc(ms, func(m spotsigs.Match) bool { return m.ID == i }) {
				row.Detected++
			}
		}
		rows = append(rows, row)
	}
	for i := range c.Docs {
		if c.Docs[i].Class != Ham {
			continue
		}
		if ms, _ := x.Query(ex.Extract(wordTokens(c.Docs[i].Raw, ao))); len(ms) > 0 {
			hamFlagged++
		}
	}
	return rows, hamFlagged
}

// padRun reports docs to a fresh engine with options eo and checks their
// padded copies.
func padRun(ctx context.Context, ao AccuracyOptions, eo campaign.Options, docs []*mime.Document, words []string, opts PaddingOptions) ([]PadRow, error) {
	dir, err := os.MkdirTemp(ao.TempDir, "nddmilter-pad-")
	if err != nil {
		return nil, fmt.Errorf("temp store: %w", err)
	}
	defer os.RemoveAll(dir)
	st, err := store.Open(dir, store.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	eng, err := campaign.New(st, ao.Lexicon, ao.Model, eo, nil)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	for i, d := range docs {
		raw := spamgen.NewMessage(d.Subject, d.Text, false)
		for r := range opts.Reporters {
			if _, err := eng.Ingester.Report(ctx, raw, store.KindSpam, fmt.Sprintf("user%d@eval.example", r)); err != nil {
				return nil, fmt.Errorf("report %d: %w", i, err)
			}
		}
	}
	var rows []PadRow
	for _, kb := range opts.SizesKB {
		row := PadRow{SizeKB: kb}
		for i, d := range docs {
			text := d.Text
			if kb > 0 {
				text += "\n\n" + padding(words, kb<<10, opts.Seed, uint64(i))
			}
			v, err := eng.Checker.Evaluate(ctx, spamgen.NewMessage(d.Subject, text, false))
			if err != nil {
				return nil, fmt.Errorf("check copy %d: %w", i, err)
			}
			row.Copies++
			switch v.Action {
			case action.Accept:
				continue
			case action.Tag:
				row.Tag++
			case action.Quarantine:
				row.Quarantine++
			case action.Reject:
				row.Reject++
			}
			row.Detected++
			for _, ev := range v.Evidence {
				if ev.Family == campaign.FamilyShort && ev.Kind == "lead" {
					row.ByLead++
					break
				}
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// padding returns about n bytes of random words, sentences of about a
// dozen words.
func padding(words []string, n int, seed, i uint64) string {
	rng := rand.New(rand.NewPCG(seed, i))
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(words[rng.IntN(len(words))])
		if rng.IntN(12) == 0 {
			b.WriteString(".\n")
		} else {
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// WriteMarkdown prints the padding table as Markdown.
func (r *PaddingResult) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "Seed %d: %d spam reported by %d users each (rebuilt as plain text from subject and visible text); copies with random words of the ham vocabulary appended. Detection rate (action ≠ accept) and actions per amount of padding:\n\n", r.Seed, r.Reported, r.Reporters)
	fmt.Fprintln(w, "| configuration | padding | detected | tag | quarantine | reject | lead key |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, row := range r.Rows {
		rate := 0.0
		if row.Copies > 0 {
			rate = float64(row.Detected) / float64(row.Copies)
		}
		fmt.Fprintf(w, "| %s | %d KiB | %.3f | %d | %d | %d | %s |\n", row.Config, row.SizeKB, rate, row.Tag, row.Quarantine, row.Reject, pct(float64(row.ByLead), float64(row.Detected)))
	}
	fmt.Fprintf(w, "\nLead key: share of the detected copies whose verdict has a lead key (same subject and leading text). SpotSigs alone (internal/spotsigs, the paper's antecedents, d = 2, c = 3) counts a copy detected when its index of the reported messages finds the copy's original; it finds a reported message for %d ham of the corpus. Run time: %s.\n", r.SpotSigsHamFlagged, r.Elapsed)
}
