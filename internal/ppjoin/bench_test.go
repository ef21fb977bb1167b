package ppjoin

import (
	"math/rand/v2"
	"testing"
)

func BenchmarkVerify(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	x, y := randomSet(rng, 5000, 300), randomSet(rng, 5000, 300)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = Verify(Cosine, 0.7, x, y)
	}
}

func BenchmarkJoin(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	var recs [][]int32
	for range 2000 {
		recs = append(recs, randomSet(rng, 20000, 20+rng.IntN(200)))
	}
	for _, suffix := range []bool{false, true} {
		name := "ppjoin"
		if suffix {
			name = "ppjoin+"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				_, _ = Join(recs, Options{Measure: Jaccard, Threshold: 0.8, NoSuffixFilter: !suffix})
			}
		})
	}
}
