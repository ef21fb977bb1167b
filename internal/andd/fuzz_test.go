package andd

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/mime"
)

func FuzzUnmarshalSketch(f *testing.F) {
	s, err := NewSigner(testModel(), testDF())
	if err != nil {
		f.Fatal(err)
	}
	doc, toks := testDoc("Hi", "some offer words here")
	good, _ := s.SketchDocument(doc, toks).MarshalBinary()
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte{1, 0, 1, 0, 0, 0})
	f.Add([]byte{1, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		sk, err := UnmarshalSketch(b)
		if err != nil {
			return
		}
		again, err := sk.MarshalBinary()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs: %x vs %x (%v)", again, b, err)
		}
		_ = Cosine(sk, sk)
		_ = Jaccard(sk, sk)
		_ = s.BandKeys(sk)
	})
}

func FuzzReadModel(f *testing.F) {
	var buf bytes.Buffer
	testModel().WriteTo(&buf)
	f.Add(buf.Bytes())
	f.Add(defaultModelJSON)
	f.Add([]byte(`{"format":"nddmilter-andd-model","version":1,"features":["bias"],"lambda":[1],"lsh":{"bits":64,"band_bits":64,"bands":255}}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ReadModel(bytes.NewReader(b))
		if err != nil {
			return
		}
		s, err := NewSigner(m, testDF())
		if err != nil {
			t.Fatalf("ReadModel accepted a model NewSigner rejects: %v", err)
		}
		doc, toks := testDoc("Subject line", "a body with several words in it", "http://h.example/p")
		sk := s.SketchDocument(doc, toks)
		_ = s.BandKeys(sk)
	})
}

// FuzzWeighSketch feeds arbitrary text, URLs and token flags through the
// whole weighting and sketching path.
func FuzzWeighSketch(f *testing.F) {
	f.Add("Subject", "body text words", "http://x.example/a", 1, true)
	f.Add("", "", "", 3, false)
	f.Add("ÀÉÎ", "\x00\xff\xfe日本語 テキスト", "http://[::1]:80/%zz", 2, true)
	s, err := NewSigner(testModel(), testDF())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, subj, text, url string, ngram int, hosts bool) {
		doc := &mime.Document{Subject: subj, Text: text, URLs: []string{url}, Hosts: []string{url}}
		toks := []mime.Token{}
		for i, w := range strings.Fields(subj + " " + text) {
			toks = append(toks, mime.Token{Term: w, Pos: i, Capitalized: i%2 == 0, AllCaps: i%3 == 0, InSubject: i == 0})
		}
		m := testModel()
		m.NGram = 1 + (ngram%5+5)%5
		ms, err := NewSigner(m, testDF())
		if err != nil {
			t.Fatal(err)
		}
		for _, sg := range []*Signer{s, ms} {
			v := sg.Weigh(doc, toks)
			sk := sg.Sketch(v)
			_ = sg.BandKeys(sk)
		}
	})
}

// benchMessages returns 40 parsed ~5 KB messages (plain text, HTML with
// a link) whose words are drawn from the default lexicon's secondary
// lexicon with a Zipf law, and the lexicon. It mirrors the I-Match
// pipeline benchmark of internal/imatchbag so the two can be compared.
func benchMessages(b *testing.B) ([]*mime.Document, [][]mime.Token, *imatchbag.Lexicon) {
	lex, err := imatchbag.DefaultLexicon()
	if err != nil {
		b.Skip("no default lexicon:", err)
	}
	vocab := append(slices.Clone(lex.Primary()), lex.Secondary()...)
	if len(vocab) < 100 {
		b.Skip("default lexicon too small")
	}
	r := rand.New(rand.NewPCG(42, 42))
	z := rand.NewZipf(r, 1.1, 2, uint64(len(vocab)-1))
	short := []string{"the", "of", "and", "to", "a", "in", "is", "for", "on", "you"}
	var docs []*mime.Document
	var toks [][]mime.Token
	for i := range 40 {
		var t strings.Builder
		for n := 0; t.Len() < 4500; n++ {
			w := vocab[z.Uint64()]
			if r.IntN(3) == 0 {
				w = short[r.IntN(len(short))]
			}
			if n%12 == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			}
			t.WriteString(w)
			if n%60 == 59 {
				t.WriteString(".\n\n")
			} else {
				t.WriteByte(' ')
			}
		}
		raw := "From: a@example.com\r\nSubject: Offer " + vocab[i] + "\r\nMIME-Version: 1.0\r\n"
		if i%2 == 0 {
			raw += "Content-Type: text/plain; charset=utf-8\r\n\r\n" + t.String()
		} else {
			raw += "Content-Type: text/html; charset=utf-8\r\n\r\n<html><body><p>" + t.String() +
				"</p><a href=\"https://shop.example.net/offer?id=42\">click here</a></body></html>"
		}
		doc := mime.Parse([]byte(raw), mime.Options{})
		docs = append(docs, doc)
		toks = append(toks, mime.Tokenize(doc, mime.TokenOptions{}))
	}
	return docs, toks, lex
}

func benchSigner(b *testing.B, minHashes int) ([]*mime.Document, [][]mime.Token, *Signer) {
	docs, toks, lex := benchMessages(b)
	m, err := DefaultModel()
	if err != nil {
		b.Fatal(err)
	}
	m.LSH.MinHashes = minHashes
	s, err := NewSigner(m, lex)
	if err != nil {
		b.Fatal(err)
	}
	return docs, toks, s
}

// loop runs fn b.N times and reports CPU ns/op and the message size.
func loop(b *testing.B, docs []*mime.Document, toks [][]mime.Token, s *Signer, fn func(i int)) {
	n, u := 0, 0
	for i := range docs {
		n += len(toks[i])
		u += len(s.Weigh(docs[i], toks[i]))
	}
	b.ReportAllocs()
	cpu := cpuTime()
	for i := 0; b.Loop(); i++ {
		fn(i % len(docs))
	}
	if c := cpuTime() - cpu; c > 0 {
		b.ReportMetric(float64(c.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
	b.ReportMetric(float64(n)/float64(len(docs)), "tokens/msg")
	b.ReportMetric(float64(u)/float64(len(docs)), "terms/msg")
}

// BenchmarkWeighSketch measures weighting plus the 384-bit cosine sketch
// of a parsed ~5 KB message (what the milter adds to the I-Match
// pipeline; compare with BenchmarkPipeline of internal/imatchbag).
func BenchmarkWeighSketch(b *testing.B) {
	docs, toks, s := benchSigner(b, 0)
	loop(b, docs, toks, s, func(i int) { s.SketchDocument(docs[i], toks[i]) })
}

// BenchmarkWeighSketchMinHash adds the 80 weighted min-hashes.
func BenchmarkWeighSketchMinHash(b *testing.B) {
	docs, toks, s := benchSigner(b, 80)
	loop(b, docs, toks, s, func(i int) { s.SketchDocument(docs[i], toks[i]) })
}

// BenchmarkWeighVectorSketch is the two-step API: Weigh (a map) then Sketch.
func BenchmarkWeighVectorSketch(b *testing.B) {
	docs, toks, s := benchSigner(b, 0)
	loop(b, docs, toks, s, func(i int) { s.Sketch(s.Weigh(docs[i], toks[i])) })
}

func BenchmarkBandKeys(b *testing.B) {
	docs, toks, s := benchSigner(b, 0)
	sk := s.SketchDocument(docs[0], toks[0])
	b.ReportAllocs()
	for b.Loop() {
		s.BandKeys(sk)
	}
}

func ExampleSigner() {
	m, _ := DefaultModel()
	s, _ := NewSigner(m, nil)
	doc := &mime.Document{Subject: "Cheap meds", Text: "Buy cheap meds online"}
	toks := []mime.Token{{Term: "cheap", Pos: 0, InSubject: true, Capitalized: true}, {Term: "meds", Pos: 1, InSubject: true},
		{Term: "cheap", Pos: 2}, {Term: "meds", Pos: 3}, {Term: "online", Pos: 4}}
	a := s.SketchDocument(doc, toks)
	b := s.SketchDocument(doc, toks[:4])
	fmt.Printf("%d bits, %d keys, near-duplicate: %v\n", 64*len(a.Bits), len(s.BandKeys(a)), Cosine(a, b) >= s.Threshold())
	// Output: 384 bits, 32 keys, near-duplicate: true
}
