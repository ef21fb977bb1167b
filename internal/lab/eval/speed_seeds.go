package eval

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"

	"github.com/nddmilter/nddmilter/internal/lab/spotsigs"
	"github.com/nddmilter/nddmilter/internal/mime"
	"github.com/nddmilter/nddmilter/internal/pipeline"
	"github.com/nddmilter/nddmilter/internal/ppjoin"
)

// SeedCost is the cost of one step of a seed method (docs/design/methods.md).
type SeedCost struct {
	Name      string  `json:"name"`
	MicrosPer float64 `json:"micros_per_message"`
	// BytesPer is the index memory per indexed message (0: not an index).
	BytesPer float64 `json:"index_bytes_per_message,omitempty"`
}

// seedSpeed times the seed methods on one core over the corpus, once:
// SpotSigs extraction, its index (the spam indexed, every message
// queried), the term set the exact check keeps, PPJoin's verification of
// every message against the spam message closest in size, and a PPJoin+
// self-join of the corpus.
func seedSpeed(c *Corpus) []SeedCost {
	prev := runtime.GOMAXPROCS(1)
	runtime.LockOSThread()
	defer func() {
		runtime.UnlockOSThread()
		runtime.GOMAXPROCS(prev)
	}()
	n := float64(len(c.Docs))
	if n == 0 {
		return nil
	}
	per := func(d time.Duration, k float64) float64 { return d.Seconds() * 1e6 / k }
	ex := spotsigs.NewExtractor(spotsigs.Options{})
	vs := make([]spotsigs.Vector, len(c.Docs))
	terms := make([][]string, len(c.Docs))
	t0 := threadCPU()
	for i := range c.Docs {
		doc := mime.Parse(c.Docs[i].Raw, mime.Options{})
		toks := mime.Tokenize(doc, mime.TokenOptions{MinLen: 1})
		words := make([]string, len(toks))
		for k, t := range toks {
			words[k] = t.Term
		}
		vs[i] = ex.Extract(words)
	}
	extract := threadCPU() - t0
	// parse and tokenize alone, to leave them out
	t0 = threadCPU()
	for i := range c.Docs {
		_ = mime.Tokenize(mime.Parse(c.Docs[i].Raw, mime.Options{}), mime.TokenOptions{MinLen: 1})
		terms[i] = c.Docs[i].Terms
	}
	extract -= threadCPU() - t0
	x := spotsigs.NewIndex(spotsigs.MatchOptions{})
	spam := 0
	for i := range c.Docs {
		if c.Docs[i].Class == Spam {
			x.Add(i, vs[i])
			spam++
		}
	}
	t0 = threadCPU()
	for i := range c.Docs {
		_, _ = x.Query(vs[i])
	}
	query := threadCPU() - t0

	hashes := make([][]uint32, len(c.Docs))
	setBytes := 0
	t0 = threadCPU()
	for i := range c.Docs {
		hashes[i] = pipeline.TermSetOf(terms[i])
	}
	hashing := threadCPU() - t0
	var bySize []int
	for i := range c.Docs {
		if c.Docs[i].Class == Spam && len(hashes[i]) > 0 {
			bySize = append(bySize, i)
			setBytes += len(pipeline.EncodeTerms(hashes[i]))
		}
	}
	slices.SortFunc(bySize, func(a, b int) int { return len(hashes[a]) - len(hashes[b]) })
	t0 = threadCPU()
	for i := range c.Docs {
		k, _ := slices.BinarySearchFunc(bySize, len(hashes[i]), func(j, n int) int { return len(hashes[j]) - n })
		if k == len(bySize) {
			k--
		}
		if k >= 0 {
			_, _ = ppjoin.Verify(ppjoin.Cosine, 0.7, hashes[i], hashes[bySize[k]])
		}
	}
	verify := threadCPU() - t0
	recs := ppjoin.Canonicalize(terms) // the paper's document-frequency order
	t0 = threadCPU()
	_, _ = ppjoin.Join(recs, ppjoin.Options{Measure: ppjoin.Cosine, Threshold: 0.7})
	join := threadCPU() - t0

	out := []SeedCost{
		{Name: "SpotSigs: spot signatures of a tokenized message", MicrosPer: per(extract, n)},
		{Name: fmt.Sprintf("SpotSigs: query of its index of the %d spam (τ = %.2f)", spam, x.Threshold()), MicrosPer: per(query, n), BytesPer: float64(x.Bytes()) / float64(max(x.Len(), 1))},
		{Name: "PPJoin: term set of a message (hashes of its unique terms)", MicrosPer: per(hashing, n)},
		{Name: "PPJoin: exact verification of a candidate (cosine ≥ 0.70)", MicrosPer: per(verify, n), BytesPer: float64(setBytes) / float64(max(len(bySize), 1))},
		{Name: fmt.Sprintf("PPJoin+: self-join of the %d messages (cosine ≥ 0.70, tokens by document frequency), per message", len(c.Docs)), MicrosPer: per(join, n)},
	}
	return out
}

// writeSeedCosts prints the seed methods' costs.
func writeSeedCosts(w io.Writer, costs []SeedCost, clock string) {
	if len(costs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nSeed methods (docs/design/methods.md), 1 core, one pass, %s:\n\n", clock)
	fmt.Fprintln(w, "| step | µs/message | index bytes/message |")
	fmt.Fprintln(w, "| --- | ---: | ---: |")
	for _, s := range costs {
		b := "–"
		if s.BytesPer > 0 {
			b = fmt.Sprintf("%.0f", s.BytesPer)
		}
		fmt.Fprintf(w, "| %s | %.1f | %s |\n", s.Name, s.MicrosPer, b)
	}
}
