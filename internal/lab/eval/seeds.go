package eval

import (
	"fmt"

	"github.com/nddmilter/nddmilter/internal/lab/spotsigs"
	"github.com/nddmilter/nddmilter/internal/mime"
	"github.com/nddmilter/nddmilter/internal/ppjoin"
)

// SpotSigsThresholds are the τ of the SpotSigs rows: the paper's best F1
// on its Gold Set and a stricter one.
var spotSigsThresholds = []float64{spotsigs.DefaultThreshold, 0.7}

// ppjoinThresholds are the cosine thresholds of the PPJoin rows: the
// ground truth's own (so its recall is 1 by definition: the row shows
// which ham an exact similarity at that level flags) and a lower one.
var ppjoinThresholds = []float64{0.9, 0.7}

// wordTokens are a document's words in order, stopwords included (SpotSigs
// anchors on them): the default tokenizer with no minimum length.
func wordTokens(raw []byte, o AccuracyOptions) []string {
	doc := mime.Parse(raw, o.Engine.Mime)
	to := o.Engine.Tokens
	to.MinLen = 1
	toks := mime.Tokenize(doc, to)
	out := make([]string, len(toks))
	for i, t := range toks {
		out[i] = t.Term
	}
	return out
}

// spotVectors extracts every document's spot signatures with the paper's
// best parameters.
func spotVectors(c *Corpus, o AccuracyOptions) []spotsigs.Vector {
	ex := spotsigs.NewExtractor(spotsigs.Options{})
	vs := make([]spotsigs.Vector, len(c.Docs))
	parallel(len(c.Docs), o.Workers, func(i int) { vs[i] = ex.Extract(wordTokens(c.Docs[i].Raw, o)) })
	return vs
}

// seedRows are the rows of SpotSigs (its exact matcher over the checked
// messages' spot signatures) and PPJoin (an exact cosine join over the
// unique terms of the reported and the checked messages), in memory.
func seedRows(c *Corpus, exps []*experiment, o AccuracyOptions) []Row {
	var rows []Row
	plain := spotVectors(c, o)
	idf := spotsigs.FilterIDF(plain, spotsigs.DefaultIDFLow, spotsigs.DefaultIDFHigh)
	for _, cfg := range []struct {
		tau float64
		vs  []spotsigs.Vector
		idf string
	}{
		{spotSigsThresholds[0], plain, ""},
		{spotSigsThresholds[0], idf, fmt.Sprintf(", IDF in [%.2f, %.2f]", spotsigs.DefaultIDFLow, spotsigs.DefaultIDFHigh)},
		{spotSigsThresholds[1], plain, ""},
	} {
		tau, vs := cfg.tau, cfg.vs
		name := fmt.Sprintf("SpotSigs (d=%d, c=%d, weighted Jaccard ≥ %.2f%s)", spotsigs.DefaultDistance, spotsigs.DefaultChainLength, tau, cfg.idf)
		o.Log.Info("row", "name", name)
		rows = append(rows, averageRows(name, -1, o, exps, func(e *experiment) outcome {
			x := spotsigs.NewIndex(spotsigs.MatchOptions{Threshold: tau})
			for _, j := range e.checked {
				x.Add(j, vs[j])
			}
			return findMatch(c, e, func(q int, f map[int]bool) {
				ms, _ := x.Query(vs[q])
				for _, m := range ms {
					f[m.ID] = true
				}
			}, o.Cost)
		}))
	}
	terms := make([][]string, len(c.Docs))
	for i := range c.Docs {
		terms[i] = c.Docs[i].Terms
	}
	recs := ppjoin.Canonicalize(terms)
	for _, t := range ppjoinThresholds {
		name := fmt.Sprintf("PPJoin+ (exact cosine ≥ %.2f over unique terms)", t)
		o.Log.Info("row", "name", name)
		rows = append(rows, averageRows(name, -1, o, exps, func(e *experiment) outcome {
			ids := append(append([]int(nil), e.queries...), e.checked...)
			sub := make([][]int32, len(ids))
			for k, i := range ids {
				sub[k] = recs[i]
			}
			pairs, _ := ppjoin.Join(sub, ppjoin.Options{Measure: ppjoin.Cosine, Threshold: t})
			found := map[int][]int{}
			nq := len(e.queries)
			for _, p := range pairs {
				// queries come first in ids: a query–checked pair has A < nq ≤ B
				if p.A < nq && p.B >= nq {
					found[ids[p.A]] = append(found[ids[p.A]], ids[p.B])
				}
			}
			return findMatch(c, e, func(q int, f map[int]bool) {
				for _, j := range found[q] {
					f[j] = true
				}
			}, o.Cost)
		}))
	}
	return rows
}
