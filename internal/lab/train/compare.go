package train

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/schollz/progressbar/v3"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/lab/eval/pairs"
	"github.com/nddmilter/nddmilter/internal/lab/stats"
)

// CompareOptions configure Compare (the flags of `nddlab train
// compare`, whose defaults are documented there).
type CompareOptions struct {
	// Spam and Ham build the test set from a corpus (Bases campaigns of
	// Copies copies, HamN unrelated messages, natural near-duplicates
	// above Natural merged); Clusters or CSV (plus Negatives) give a
	// labeled one.
	Spam, Ham     []string
	Clusters, CSV string
	Negatives     []string
	Bases, HamN   int
	Copies        int
	Seed          uint64
	Natural       float64
	// Model, JaccardModel and Lexicon are files; "" for the embedded ones.
	Model, JaccardModel string
	Lexicon             string
	Methods             []string
	// Bands are extra band layouts "BxR" measured at the model's threshold.
	Bands []string
	Quiet bool
}

// Compare scores the near-duplicate detection methods over every pair of
// test messages and prints Max F1, precision and recall as Markdown.
func Compare(ctx context.Context, o CompareOptions, stdout io.Writer) error {
	lex, err := loadLexicon(o.Lexicon)
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	cm, err := loadModel(o.Model, andd.DefaultModel)
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	jm, err := loadModel(o.JaccardModel, andd.DefaultJaccardModel)
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	items, merges, err := compareItems(ctx, &o)
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	st := pairs.Describe(items)
	fmt.Fprintf(stdout, "%d messages, %d campaigns, %d unrelated; %d pairs, %d near-duplicate", st.Messages, st.Clusters, st.Singletons, st.Pairs, st.Positives)
	if merges > 0 {
		fmt.Fprintf(stdout, " (%d natural near-duplicate merges)", merges)
	}
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout)
	var bar *progressbar.ProgressBar
	stage := ""
	pp, err := pairs.Prepare(ctx, items, pairs.Options{Lexicon: lex, Cosine: cm, Jaccard: jm, Methods: o.Methods,
		Progress: func(s string, done, total int) {
			if s != stage {
				if bar != nil {
					bar.Finish()
				}
				stage = s
				bar = newBar(o.Quiet, total, s)
			}
			bar.Set(done)
		}})
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	rows := pp.Compare()
	if bar != nil {
		bar.Finish()
	}
	if err := pairs.Markdown(stdout, rows); err != nil {
		return err
	}
	if slices.Contains(pp.Methods(), pairs.MethodANDDLSHCos) {
		at := stats.AtThreshold(pp.Scores(pairs.MethodANDDLSHCos), pp.Labels(), cm.Threshold)
		fmt.Fprintf(stdout, "\nANDD-LSH-Cos at the model's threshold %.3f (what the daemon uses): F1 %.3f, precision %.3f, recall %.3f\n",
			cm.Threshold, at.F1, at.Precision, at.Recall)
	}
	if len(o.Bands) > 0 {
		return compareBands(stdout, pp, cm.Threshold, o.Bands)
	}
	return nil
}

// compareItems reads or builds the test set.
func compareItems(ctx context.Context, o *CompareOptions) (items []pairs.Item, merges int, err error) {
	switch {
	case o.Clusters != "":
		items, _, err = pairs.LoadClusters(ctx, o.Clusters)
	case o.CSV != "":
		items, _, err = pairs.LoadCSV(ctx, o.CSV)
	case len(o.Spam) > 0:
		return pairs.SpamAssassinSet(ctx, o.Spam, o.Ham, pairs.SpamAssassinOptions{
			Bases: o.Bases, Ham: o.HamN, Seed: o.Seed, Natural: o.Natural,
			Synth: pairs.SynthOptions{Copies: o.Copies, Seed: o.Seed},
		})
	default:
		return nil, 0, errors.New("give --spam (and --ham), --clusters or --csv")
	}
	if err != nil || len(o.Negatives) == 0 {
		return items, 0, err
	}
	neg, err := pairs.ReadAll(ctx, o.Negatives, -1)
	if err != nil {
		return nil, 0, err
	}
	return append(items, neg...), 0, nil
}

// compareBands measures the band layouts ("BxR") at the threshold.
func compareBands(stdout io.Writer, pp *pairs.Prepared, threshold float64, bands []string) error {
	var cfgs []pairs.BandConfig
	for _, s := range bands {
		var c pairs.BandConfig
		if _, err := fmt.Sscanf(s, "%dx%d", &c.Bands, &c.Bits); err != nil {
			return fmt.Errorf("compare: --bands %q: want BxR", s)
		}
		cfgs = append(cfgs, c)
	}
	brows, err := pp.Bands(threshold, cfgs)
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	fmt.Fprintln(stdout)
	return pairs.BandsMarkdown(stdout, threshold, brows)
}
