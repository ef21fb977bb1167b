package spotsigs

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func benchText(rng *rand.Rand, n int) []string {
	vocab := strings.Fields("the a is was have will do can offer money free account please click here now today price " +
		"order save best online new product service quality report market stock company bank")
	toks := make([]string, n)
	for i := range toks {
		toks[i] = vocab[rng.IntN(len(vocab))]
	}
	return toks
}

func BenchmarkExtract(b *testing.B) {
	toks := benchText(rand.New(rand.NewPCG(1, 1)), 300)
	e := NewExtractor(Options{})
	b.ReportAllocs()
	for b.Loop() {
		_ = e.Extract(toks)
	}
}

func BenchmarkQuery(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	e := NewExtractor(Options{})
	x := NewIndex(MatchOptions{})
	var vs []Vector
	for i := range 2000 {
		v := e.Extract(benchText(rng, 50+rng.IntN(400)))
		vs = append(vs, v)
		x.Add(i, v)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_, _ = x.Query(vs[i%len(vs)])
		i++
	}
}
