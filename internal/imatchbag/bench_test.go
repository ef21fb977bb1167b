package imatchbag

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/mime"
)

// zipfText returns about n bytes of English-like text: words of the default
// lexicon drawn with their document frequencies (so frequent words are
// frequent), in sentences and paragraphs.
func zipfText(rng *rand.Rand, lex *Lexicon, n int) string {
	var b strings.Builder
	total := 0
	for _, t := range lex.ranked {
		total += int(t.df)
	}
	pick := func() string {
		x := rng.IntN(total)
		for _, t := range lex.ranked {
			x -= int(t.df)
			if x < 0 {
				return t.term
			}
		}
		return "the"
	}
	short := []string{"the", "of", "and", "to", "a", "in", "is", "for", "on", "you"}
	words := 0
	for b.Len() < n {
		if rng.IntN(3) == 0 {
			b.WriteString(short[rng.IntN(len(short))])
		} else {
			w := pick()
			if words%12 == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			}
			b.WriteString(w)
		}
		words++
		switch {
		case words%60 == 0:
			b.WriteString(".\n\n")
		case words%12 == 0:
			b.WriteString(". ")
		default:
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// reportRates reports items per wall-clock second and per CPU second (the
// latter is what one core achieves, whatever else runs on the machine).
func reportRates(b *testing.B, cpu time.Duration, unit string) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit+"/s")
	if cpu > 0 {
		b.ReportMetric(float64(b.N)/cpu.Seconds(), unit+"/cpu-s")
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func BenchmarkSign(b *testing.B) {
	lex, err := DefaultLexicon()
	if err != nil {
		b.Fatal(err)
	}
	s := mustSigner(b, lex, Options{})
	rng := rand.New(rand.NewPCG(9, 9))
	var docs [][]string
	for range 50 {
		docs = append(docs, TextTerms(zipfText(rng, lex, 4200), mime.TokenOptions{}))
	}
	b.ReportAllocs()
	cpu := cpuTime()
	for i := 0; b.Loop(); i++ {
		s.Sign(docs[i%len(docs)])
	}
	reportRates(b, cpuTime()-cpu, "docs")
}

// The whole path from a raw message to its signatures is measured in
// internal/pipeline (BenchmarkIMatch, BenchmarkStages), which the engine calls.
