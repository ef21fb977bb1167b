package andd

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

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

// benchTokens returns the tokens of a ~5 KB message: ~850 words drawn
// from a Zipf distribution over a 3000-word vocabulary, of which ~500 are
// kept by the default token filter (≥ 4 letters).
func benchTokens() (*mime.Document, []mime.Token) {
	r := rand.New(rand.NewPCG(42, 42))
	vocab := make([]string, 3000)
	for i := range vocab {
		vocab[i] = randWord(r)
	}
	z := rand.NewZipf(r, 1.1, 2, uint64(len(vocab)-1))
	var b strings.Builder
	for b.Len() < 5000 {
		w := vocab[z.Uint64()]
		if r.IntN(12) == 0 {
			w = strings.ToUpper(w[:1]) + w[1:]
		}
		b.WriteString(w)
		b.WriteByte(' ')
	}
	return testDoc("Limited offer for "+vocab[3], b.String(), "http://www.shop.example/offer?id=1", "http://cdn.example/img.png")
}

// BenchmarkWeighSketch measures weighting plus the 384-bit cosine sketch
// (what the milter computes per message; min-hashes disabled).
func BenchmarkWeighSketch(b *testing.B) {
	doc, toks := benchTokens()
	m, err := DefaultModel()
	if err != nil {
		b.Fatal(err)
	}
	m.LSH.MinHashes = 0
	s := mustSigner(b, m)
	b.ReportMetric(float64(len(toks)), "tokens")
	b.ReportAllocs()
	for b.Loop() {
		s.SketchDocument(doc, toks)
	}
}

// BenchmarkWeighSketchMinHash adds the 80 weighted min-hashes.
func BenchmarkWeighSketchMinHash(b *testing.B) {
	doc, toks := benchTokens()
	m, err := DefaultModel()
	if err != nil {
		b.Fatal(err)
	}
	s := mustSigner(b, m)
	b.ReportAllocs()
	for b.Loop() {
		s.SketchDocument(doc, toks)
	}
}

// BenchmarkWeighVectorSketch is the two-step API: Weigh (a map) then Sketch.
func BenchmarkWeighVectorSketch(b *testing.B) {
	doc, toks := benchTokens()
	m, err := DefaultModel()
	if err != nil {
		b.Fatal(err)
	}
	m.LSH.MinHashes = 0
	s := mustSigner(b, m)
	b.ReportAllocs()
	for b.Loop() {
		s.Sketch(s.Weigh(doc, toks))
	}
}

func BenchmarkBandKeys(b *testing.B) {
	doc, toks := benchTokens()
	m, _ := DefaultModel()
	s := mustSigner(b, m)
	sk := s.SketchDocument(doc, toks)
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
