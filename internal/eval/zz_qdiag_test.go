package eval

import (
	"fmt"
	"os"
	"sort"
	"testing"

	"github.com/nddmilter/nddmilter/internal/mime"
	"github.com/nddmilter/nddmilter/internal/qgram"
	"github.com/nddmilter/nddmilter/internal/spamgen"
)

func TestZZQDiag(t *testing.T) {
	if os.Getenv("QDIAG") == "" {
		t.Skip()
	}
	c, err := LoadCorpus("../../.cache/spamassassin", LoadOptions{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	words, paras := legitText(c)
	sk := qgram.NewSketcher(qgram.SketchOptions{})
	type sd struct {
		s qgram.Sketch
		p qgram.Profile
		k map[string]bool
	}
	sign := func(raw []byte) (sd, bool) {
		d := mime.Parse(raw, mime.Options{})
		s, ok := sk.Sketch(d.Subject, "\n", d.Text)
		if !ok {
			return sd{}, false
		}
		k := map[string]bool{}
		for _, x := range qgram.BandKeys(&s) {
			k[string(x)] = true
		}
		return sd{s, qgram.NewProfile(d.Subject+"\n"+d.Text, qgram.Options{FoldCase: true, MaxRunes: 1 << 15}), k}, true
	}
	var spam []sd
	for i := range c.Docs {
		d := &c.Docs[i]
		if d.Class != Spam || !d.usable() || i%10 != 0 {
			continue
		}
		s, ok := sign(d.Raw)
		if !ok {
			continue
		}
		spam = append(spam, s)
		if len(spam) < 60 {
			for _, kind := range []spamgen.Kind{spamgen.Typos, spamgen.Combo} {
				raw, err := spamgen.Mutate(d.Raw, spamgen.Options{Kinds: []spamgen.Kind{kind}, Strength: 0.3, Seed: uint64(i), Words: words, Paragraphs: paras})
				if err != nil {
					continue
				}
				m, ok := sign(raw)
				if !ok {
					fmt.Println(kind, "no sketch")
					continue
				}
				shared := 0
				for k := range m.k {
					if s.k[k] {
						shared++
					}
				}
				fmt.Printf("%s exact %.3f est %.3f bands %d\n", kind, qgram.Similarity(s.p, m.p), qgram.EstimateSimilarity(&s.s, &m.s), shared)
			}
		}
	}
	var hamBest []float64
	for i := range c.Docs {
		d := &c.Docs[i]
		if d.Class != Ham || i%3 != 0 {
			continue
		}
		h, ok := sign(d.Raw)
		if !ok {
			continue
		}
		best := 0.0
		for _, s := range spam {
			best = max(best, qgram.EstimateSimilarity(&h.s, &s.s))
		}
		hamBest = append(hamBest, best)
	}
	sort.Float64s(hamBest)
	n := len(hamBest)
	fmt.Println("ham max est docq vs", len(spam), "spam: n", n, "p50", hamBest[n/2], "p99", hamBest[n*99/100], "p99.9", hamBest[n*999/1000], "max", hamBest[n-1], hamBest[n-5:])
}
