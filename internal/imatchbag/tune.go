package imatchbag

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

// TuneOptions configure Tune. Zero values select the defaults.
type TuneOptions struct {
	// Windows are the candidate normalized-idf windows [min, max].
	// Default: a grid over [0.05, 0.7].
	Windows [][2]float64
	// Signer options used for every window (K, MinTerms, MinRatio...).
	Signer Options
	// Build options (SecondaryMax, Seed, MinDF); the window is overridden.
	Build BuildOptions
	// HoldOut: every HoldOut-th document is held out of the lexicon and
	// used for evaluation. Default 5.
	HoldOut int
	// MaxEval caps the number of evaluated documents. Default 2000.
	MaxEval int
	// Seed of the perturbations. Default 1.
	Seed uint64
	// ShortWords is the length of the short documents (prefixes of the
	// held-out documents) on which false matches are also counted: short
	// messages have few lexicon words and collide most easily. Default 40.
	ShortWords int
	// Negatives are unrelated documents (e.g. legitimate mail; their terms,
	// not necessarily unique): every pair sharing a signature is counted as
	// a false match. Optional.
	Negatives [][]string
	// Progress, when set, is called after each window.
	Progress func(done, total int)
}

// DefaultTuneWindows is the grid of windows Tune evaluates by default.
var DefaultTuneWindows = [][2]float64{
	{0.05, 0.3}, {0.1, 0.3}, {0.15, 0.35}, {0.2, 0.3}, {0.2, 0.35}, {0.2, 0.4}, {0.25, 0.35},
	{0.25, 0.4}, {0.25, 0.45}, {0.3, 0.4}, {0.3, 0.5}, {0.3, 0.6}, {0.4, 0.6},
}

// Perturbations applied by Tune to every evaluated document. Each is a
// realistic spam-campaign randomization of the document's word sequence.
var tunePerturbations = []struct {
	Name string
	Desc string
	fn   func(rng *rand.Rand, doc []string, vocab []string, donor []string) []string
}{
	{"edit3", "3 random edits (insert a corpus word, delete a word, or a typo)", func(rng *rand.Rand, d, v, _ []string) []string { return edits(rng, d, v, 3) }},
	{"edit10", "10 random edits", func(rng *rand.Rand, d, v, _ []string) []string { return edits(rng, d, v, 10) }},
	{"append", "append 30 words of another document", func(rng *rand.Rand, d, _, donor []string) []string {
		return append(slices.Clone(d), donor[:min(30, len(donor))]...)
	}},
	{"shuffle+edit3", "shuffle the word order, then 3 edits", func(rng *rand.Rand, d, v, _ []string) []string {
		c := slices.Clone(d)
		rng.Shuffle(len(c), func(i, j int) { c[i], c[j] = c[j], c[i] })
		return edits(rng, c, v, 3)
	}},
}

// edits applies n random edits to a word sequence: insertion of a word
// drawn from the corpus (frequency-weighted), deletion of a word, or a typo
// (a letter replaced), with equal probability.
func edits(rng *rand.Rand, d, vocab []string, n int) []string {
	c := slices.Clone(d)
	for range n {
		switch op := rng.IntN(3); {
		case op == 0 || len(c) == 0:
			w := vocab[rng.IntN(len(vocab))]
			i := rng.IntN(len(c) + 1)
			c = slices.Insert(c, i, w)
		case op == 1:
			i := rng.IntN(len(c))
			c = slices.Delete(c, i, i+1)
		default:
			i := rng.IntN(len(c))
			b := []byte(c[i])
			b[rng.IntN(len(b))] = byte('a' + rng.IntN(26))
			c[i] = string(b)
		}
	}
	return c
}

// maxTuneVocab bounds the word stream from which inserted words are drawn.
const maxTuneVocab = 2 << 20

// TuneRow is the measurement of one window.
type TuneRow struct {
	IdfMin, IdfMax float64
	Primary        int     // |L|
	Signed         float64 // share of evaluated documents with a bag-0 signature
	// Recall[i] is the share of signed documents whose i-th perturbation
	// (TunePerturbations) still matches on some coordinate of the (K+1)
	// signature; RecallPlain the same with the original lexicon only.
	Recall, RecallPlain []float64
	// FalsePairs is the number of pairs of distinct evaluated documents
	// sharing some signature; Pairs the number of pairs of signed ones.
	FalsePairs, Pairs int
	// FalsePairsPlain counts pairs sharing the bag-0 signature.
	FalsePairsPlain int
	// The same for the short documents: share signed, recall of edit3
	// (bagged), false pairs (bagged) among the signed ones.
	ShortSigned, ShortRecall    float64
	ShortFalsePairs, ShortPairs int
	// The same for Negatives: share signed, pairs sharing a signature
	// (bagged / original lexicon only), and one example pair.
	NegSigned                    float64
	NegFalsePairs, NegFalsePlain int
	NegPairs                     int
	NegDissimilar                int // sharing pairs with cosine < 0.5
	NegExample                   [2]int
}

// TuneReport is the outcome of Tune.
type TuneReport struct {
	Documents, Eval int
	ShortWords      int
	Negatives       int
	Perturbations   []string // names
	Descriptions    []string
	Rows            []TuneRow
}

// Tune measures, for every candidate window, how often near-duplicates of
// held-out documents keep a matching signature (recall) and how often
// unrelated documents share one (false matches). docs are word sequences in
// document order (mime.Tokenize terms, not deduplicated).
func Tune(docs [][]string, opts TuneOptions) (*TuneReport, error) {
	if opts.HoldOut <= 1 {
		opts.HoldOut = 5
	}
	if opts.MaxEval <= 0 {
		opts.MaxEval = 2000
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	if len(opts.Windows) == 0 {
		opts.Windows = DefaultTuneWindows
	}
	if opts.ShortWords <= 0 {
		opts.ShortWords = 40
	}
	b := NewBuilder()
	var eval [][]string
	var vocab []string
	for i, d := range docs {
		if i%opts.HoldOut == opts.HoldOut-1 {
			if len(eval) < opts.MaxEval {
				eval = append(eval, d)
			}
			continue
		}
		b.Add(unique(d))
		if len(vocab) < maxTuneVocab {
			vocab = append(vocab, d...)
		}
	}
	if len(eval) < 2 || len(vocab) == 0 {
		return nil, fmt.Errorf("tune: need more documents (have %d)", len(docs))
	}
	rep := &TuneReport{Documents: len(docs), Eval: len(eval), ShortWords: opts.ShortWords, Negatives: len(opts.Negatives)}
	for _, p := range tunePerturbations {
		rep.Perturbations = append(rep.Perturbations, p.Name)
		rep.Descriptions = append(rep.Descriptions, p.Desc)
	}
	for wi, w := range opts.Windows {
		bo := opts.Build
		bo.IdfMin, bo.IdfMax = w[0], w[1]
		lex, err := b.Build(bo)
		if err != nil {
			return nil, fmt.Errorf("tune: window [%g, %g]: %w", w[0], w[1], err)
		}
		s, err := NewSigner(lex, opts.Signer)
		if err != nil {
			return nil, fmt.Errorf("tune: %w", err)
		}
		row := TuneRow{IdfMin: w[0], IdfMax: w[1], Primary: len(lex.primary),
			Recall: make([]float64, len(tunePerturbations)), RecallPlain: make([]float64, len(tunePerturbations))}
		rng := rand.New(rand.NewPCG(opts.Seed, 0x7475)) // same perturbations for every window
		byKey := map[string][]int{}
		signed := 0
		for i, d := range eval {
			r := s.Sign(unique(d))
			if len(r.Signatures) == 0 || r.Signatures[0].Bag != 0 {
				// Draw the perturbations anyway so that every window sees the same ones.
				for _, p := range tunePerturbations {
					p.fn(rng, d, vocab, eval[(i+1)%len(eval)])
				}
				continue
			}
			signed++
			for _, sig := range r.Signatures {
				k := string(sig.AppendKey(nil))
				byKey[k] = append(byKey[k], i)
			}
			for pi, p := range tunePerturbations {
				pr := s.Sign(unique(p.fn(rng, d, vocab, eval[(i+1)%len(eval)])))
				if len(pr.Signatures) > 0 && pr.Signatures[0] == r.Signatures[0] {
					row.RecallPlain[pi]++
				}
				if anyCommon(r.Signatures, pr.Signatures) {
					row.Recall[pi]++
				}
			}
		}
		if signed > 0 {
			for pi := range row.Recall {
				row.Recall[pi] /= float64(signed)
				row.RecallPlain[pi] /= float64(signed)
			}
		}
		row.Signed = float64(signed) / float64(len(eval))
		row.Pairs = signed * (signed - 1) / 2
		pairs := map[[2]int]bool{}
		plain := map[[2]int]bool{}
		for k, ds := range byKey {
			bag0 := k[6] == 0
			for x := 0; x < len(ds); x++ {
				for y := x + 1; y < len(ds); y++ {
					pairs[[2]int{ds[x], ds[y]}] = true
					if bag0 {
						plain[[2]int{ds[x], ds[y]}] = true
					}
				}
			}
		}
		row.FalsePairs, row.FalsePairsPlain = len(pairs), len(plain)
		row.ShortSigned, row.ShortRecall, row.ShortFalsePairs, row.ShortPairs = tuneShort(s, eval, vocab, opts)
		if len(opts.Negatives) > 0 {
			row.NegSigned, row.NegFalsePairs, row.NegFalsePlain, row.NegDissimilar, row.NegPairs, row.NegExample = falsePairs(s, opts.Negatives)
		}
		rep.Rows = append(rep.Rows, row)
		if opts.Progress != nil {
			opts.Progress(wi+1, len(opts.Windows))
		}
	}
	return rep, nil
}

// tuneShort measures signing, edit3 recall and false pairs on the first
// ShortWords words of the evaluated documents.
func tuneShort(s *Signer, eval [][]string, vocab []string, opts TuneOptions) (signed, recall float64, falsePairs, pairs int) {
	rng := rand.New(rand.NewPCG(opts.Seed, 0x73686f))
	byKey := map[string][]int{}
	n, kept := 0, 0
	for i, d := range eval {
		d = d[:min(len(d), opts.ShortWords)]
		r := s.Sign(unique(d))
		pr := s.Sign(unique(edits(rng, d, vocab, 3)))
		if len(r.Signatures) == 0 || r.Signatures[0].Bag != 0 {
			continue
		}
		n++
		if anyCommon(r.Signatures, pr.Signatures) {
			kept++
		}
		for _, sig := range r.Signatures {
			k := string(sig.AppendKey(nil))
			byKey[k] = append(byKey[k], i)
		}
	}
	fp := map[[2]int]bool{}
	for _, ds := range byKey {
		for x := 0; x < len(ds); x++ {
			for y := x + 1; y < len(ds); y++ {
				fp[[2]int{ds[x], ds[y]}] = true
			}
		}
	}
	if n > 0 {
		recall = float64(kept) / float64(n)
	}
	return float64(n) / float64(len(eval)), recall, len(fp), n * (n - 1) / 2
}

// falsePairs signs docs and counts the pairs sharing some signature.
// Pairs whose cosine similarity of unique terms is below 0.5 are counted
// separately as dissimilar: those are the real false matches.
func falsePairs(s *Signer, docs [][]string) (signed float64, pairs, plain, dissimilar, total int, example [2]int) {
	byKey := map[string][]int{}
	n := 0
	us := make([][]string, len(docs))
	for i, d := range docs {
		us[i] = unique(d)
		r := s.Sign(us[i])
		if len(r.Signatures) == 0 {
			continue
		}
		n++
		for _, sig := range r.Signatures {
			k := string(sig.AppendKey(nil))
			byKey[k] = append(byKey[k], i)
		}
	}
	all, bag0 := map[[2]int]bool{}, map[[2]int]bool{}
	for k, ds := range byKey {
		for x := 0; x < len(ds); x++ {
			for y := x + 1; y < len(ds); y++ {
				pr := [2]int{ds[x], ds[y]}
				all[pr] = true
				if k[6] == 0 {
					bag0[pr] = true
				}
			}
		}
	}
	for pr := range all {
		if cosine(us[pr[0]], us[pr[1]]) >= 0.5 {
			continue // a true near-duplicate (quoted reply, same list footer)
		}
		dissimilar++
		if example == [2]int{} || pr[0] < example[0] || (pr[0] == example[0] && pr[1] < example[1]) {
			example = pr
		}
	}
	return float64(n) / float64(len(docs)), len(all), len(bag0), dissimilar, n * (n - 1) / 2, example
}

// cosine is eq. (2) of the paper: common unique terms / sqrt(|a| |b|).
func cosine(a, b []string) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	common := 0
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] == b[j]:
			common++
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return float64(common) / math.Sqrt(float64(len(a))*float64(len(b)))
}

func anyCommon(a, b []Signature) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

func unique(d []string) []string {
	u := slices.Clone(d)
	slices.Sort(u)
	return slices.Compact(u)
}

// Markdown renders the report as a Markdown table.
func (r *TuneReport) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d documents, %d held out and evaluated (and their first %d words as short documents); recall = share of signed documents whose perturbed copy still matches (bagged / original lexicon only); false = pairs of distinct documents sharing a signature (bagged / original only).\n\n", r.Documents, r.Eval, r.ShortWords)
	for i, n := range r.Perturbations {
		fmt.Fprintf(&b, "- %s: %s\n", n, r.Descriptions[i])
	}
	b.WriteString("\n| nidf window | L terms | signed |")
	for _, n := range r.Perturbations {
		fmt.Fprintf(&b, " %s |", n)
	}
	b.WriteString(" false pairs | short: signed | short: edit3 | short: false pairs |")
	if r.Negatives > 0 {
		b.WriteString(" negatives: signed | negatives: pairs sharing a signature | of which dissimilar |")
	}
	b.WriteString("\n|---|---|---|")
	for range r.Perturbations {
		b.WriteString("---|")
	}
	b.WriteString("---|---|---|---|")
	if r.Negatives > 0 {
		b.WriteString("---|---|---|")
	}
	b.WriteString("\n")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "| [%g, %g] | %d | %.1f%% |", row.IdfMin, row.IdfMax, row.Primary, 100*row.Signed)
		for i := range r.Perturbations {
			fmt.Fprintf(&b, " %.1f%% / %.1f%% |", 100*row.Recall[i], 100*row.RecallPlain[i])
		}
		fmt.Fprintf(&b, " %d / %d of %d | %.1f%% | %.1f%% | %d of %d |", row.FalsePairs, row.FalsePairsPlain, row.Pairs,
			100*row.ShortSigned, 100*row.ShortRecall, row.ShortFalsePairs, row.ShortPairs)
		if r.Negatives > 0 {
			fmt.Fprintf(&b, " %.1f%% | %d / %d of %d | %d |", 100*row.NegSigned, row.NegFalsePairs, row.NegFalsePlain, row.NegPairs, row.NegDissimilar)
		}
		b.WriteString("\n")
	}
	return b.String()
}
