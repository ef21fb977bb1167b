package andd

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/mime"
)

// hideRange hides the RangeDF method of a DocFreq, so that NewSigner
// builds no vocabulary table.
type hideRange struct{ DocFreq }

// rangeDF is a mapDF that lists its vocabulary.
type rangeDF struct{ mapDF }

func (r rangeDF) RangeDF(fn func(string, int) bool) {
	for t, d := range r.df {
		if !fn(t, d) {
			return
		}
	}
}

func TestVocabLookup(t *testing.T) {
	df := rangeDF{mapDF{n: 100, df: map[string]int{
		"a": 1, "ab": 2, "abcdefgh": 3, "abcdefghi": 4, "abcdefghij": 5,
		"abcdefghik": 6, "été": 7, "zero": 0, "neg": -3, "x\x00": 8,
	}}}
	v := newVocab(df, 7)
	if v == nil {
		t.Fatal("no vocabulary built")
	}
	tests := []struct {
		term string
		df   int32
	}{
		{"a", 1}, {"ab", 2}, {"abcdefgh", 3}, {"abcdefghi", 4}, {"abcdefghij", 5},
		{"abcdefghik", 6}, {"été", 7}, {"x\x00", 8}, {"x", 0}, {"", 0}, {"zero", 0},
		{"neg", 0}, {"abcdefg", 0}, {"abcdefghijk", 0}, {"abcdefghia", 0}, {"b", 0},
	}
	for _, tc := range tests {
		got, h := v.lookup(tc.term)
		if got != tc.df {
			t.Errorf("lookup(%q) df = %d, want %d", tc.term, got, tc.df)
		}
		if got > 0 && h != termHash(tc.term, 7) {
			t.Errorf("lookup(%q) hash = %#x, want %#x", tc.term, h, termHash(tc.term, 7))
		}
	}
	if newVocab(df.mapDF, 7) != nil {
		t.Error("vocabulary built for a DocFreq without RangeDF")
	}
}

// TestVocabMatchesDocFreq checks that the vocabulary of the default
// lexicon gives every lexicon term its DF, and that signers with and
// without the table give the same sketches.
func TestVocabMatchesDocFreq(t *testing.T) {
	lex, err := imatchbag.DefaultLexicon()
	if err != nil {
		t.Skip("no default lexicon:", err)
	}
	m, err := DefaultModel()
	if err != nil {
		t.Fatal(err)
	}
	fast, err := NewSigner(m, lex)
	if err != nil {
		t.Fatal(err)
	}
	slow, err := NewSigner(m, hideRange{lex})
	if err != nil {
		t.Fatal(err)
	}
	if fast.ex.vocab == nil || slow.ex.vocab != nil {
		t.Fatal("vocabulary table not built as expected")
	}
	n := 0
	lex.RangeDF(func(term string, df int) bool {
		n++
		if got, h := fast.ex.vocab.lookup(term); int(got) != df || h != termHash(term, m.LSH.Seed) {
			t.Fatalf("lookup(%q) = %d, want %d", term, got, df)
		}
		if got, _ := fast.ex.vocab.lookup(term + "x"); int(got) != lex.DF(term+"x") {
			t.Fatalf("lookup(%q) = %d, want %d", term+"x", got, lex.DF(term+"x"))
		}
		return true
	})
	if n == 0 {
		t.Fatal("empty lexicon")
	}
	words := append(slices.Clone(lex.Primary()), lex.Secondary()...)
	words = append(words, "unseenword", "zzqx", "blah", "supercalifragilistic")
	r := rand.New(rand.NewPCG(3, 3))
	for i := range 30 {
		var b strings.Builder
		for b.Len() < 300+100*i {
			b.WriteString(words[r.IntN(len(words))])
			b.WriteByte(' ')
		}
		doc := &mime.Document{Subject: words[r.IntN(len(words))], Text: b.String(),
			URLs: []string{"http://" + words[r.IntN(len(words))] + ".example.com/x"}}
		terms := mime.Analyze(doc, mime.TokenOptions{})
		toks := mime.Tokenize(doc, mime.TokenOptions{})
		for name, pair := range map[string][2]Sketch{
			"SketchTerms":    {fast.SketchTerms(doc, terms), slow.SketchTerms(doc, terms)},
			"SketchDocument": {fast.SketchDocument(doc, toks), slow.SketchDocument(doc, toks)},
		} {
			if !slices.Equal(pair[0].Bits, pair[1].Bits) || !slices.Equal(pair[0].MinHash, pair[1].MinHash) {
				t.Fatalf("doc %d %s: sketch with vocabulary %x, without %x", i, name, pair[0].Bits, pair[1].Bits)
			}
		}
		if pair := [2]Vector{fast.Weigh(doc, toks), slow.Weigh(doc, toks)}; len(pair[0]) != len(pair[1]) {
			t.Fatalf("doc %d: Weigh differs", i)
		}
	}
}

// BenchmarkSketchTermsVocab compares SketchTerms with the vocabulary table
// (the default with a lexicon) and through DocFreq.DF, in one run.
func BenchmarkSketchTermsVocab(b *testing.B) {
	docs, _, lex := benchMessages(b)
	m, err := DefaultModel()
	if err != nil {
		b.Fatal(err)
	}
	terms := make([]*mime.Terms, len(docs))
	for i, d := range docs {
		terms[i] = mime.Analyze(d, mime.TokenOptions{})
	}
	for _, c := range []struct {
		name string
		df   DocFreq
	}{{"Vocab", lex}, {"DocFreq", hideRange{lex}}} {
		s, err := NewSigner(m, c.df)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := cpuTime()
			for i := 0; b.Loop(); i++ {
				s.SketchTerms(docs[i%len(docs)], terms[i%len(docs)])
			}
			if c := cpuTime() - cpu; c > 0 {
				b.ReportMetric(float64(c.Nanoseconds())/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

func TestTermRunes(t *testing.T) {
	for _, s := range []string{"", "a", "hello", "exactlytwentyletters", "twentyoneletterswords",
		"été", "naïveté", "日本語のテキスト", "\xff\xfe", "a\xffb", strings.Repeat("é", 30),
		strings.Repeat("x", 79), strings.Repeat("x", 80), strings.Repeat("\xff", 90)} {
		if got, want := termLenTab[termRunes(s)], min(float64(utf8.RuneCountInString(s)), 20)/20; got != want {
			t.Errorf("termlen(%q) = %v, want %v", s, got, want)
		}
	}
}
