package andd

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nddmilter/nddmilter/internal/mime"
)

// checkSketchTerms fails t when the mime.Analyze path (SketchTerms,
// WeighTerms) disagrees with the token path on doc.
func checkSketchTerms(t *testing.T, s *Signer, doc *mime.Document, opts mime.TokenOptions) {
	t.Helper()
	toks := mime.Tokenize(doc, opts)
	an := mime.Analyze(doc, opts)
	want, got := s.SketchDocument(doc, toks), s.SketchTerms(doc, an)
	if !slices.Equal(got.Bits, want.Bits) || !slices.Equal(got.MinHash, want.MinHash) {
		t.Fatalf("SketchTerms = %x %x, want %x %x", got.Bits, got.MinHash, want.Bits, want.MinHash)
	}
	if dfs := s.DocFreq(); dfs != nil {
		df := make([]int32, len(an.Sorted))
		for i, term := range an.Sorted {
			df[i] = int32(dfs.DF(term))
		}
		got = s.SketchTermsDF(doc, an, df)
		if !slices.Equal(got.Bits, want.Bits) || !slices.Equal(got.MinHash, want.MinHash) {
			t.Fatalf("SketchTermsDF = %x %x, want %x %x", got.Bits, got.MinHash, want.Bits, want.MinHash)
		}
	}
	if got = s.SketchTermsDF(doc, an, make([]int32, len(an.Sorted)+1)); !slices.Equal(got.Bits, want.Bits) {
		t.Fatalf("SketchTermsDF with a df of the wrong length = %x, want %x", got.Bits, want.Bits)
	}
	wv, gv := s.Weigh(doc, toks), s.WeighTerms(doc, an)
	if len(wv) != len(gv) {
		t.Fatalf("WeighTerms: %d terms, want %d", len(gv), len(wv))
	}
	for term, w := range wv {
		if gv[term] != w {
			t.Fatalf("WeighTerms[%q] = %v, want %v", term, gv[term], w)
		}
	}
}

// TestSketchTermsMatchesTokens checks, on every sample message of
// internal/mime and for unigram, bigram and min-hash models, that the
// one-pass analysis gives the very sketch of the token path.
func TestSketchTermsMatchesTokens(t *testing.T) {
	files, _ := filepath.Glob("../mime/testdata/*.eml")
	if len(files) == 0 {
		t.Skip("no sample messages")
	}
	def, err := DefaultModel()
	if err != nil {
		t.Fatal(err)
	}
	bigram := testModel()
	bigram.NGram = 2
	noMH := testModel()
	noMH.LSH.MinHashes = 0
	models := map[string]*Model{"default": def, "test": testModel(), "bigram": bigram, "nominhash": noMH}
	for name, m := range models {
		t.Run(name, func(t *testing.T) {
			s := mustSigner(t, m)
			if nodf, err := NewSigner(m, nil); err != nil {
				t.Fatal(err)
			} else if nodf.DocFreq() != nil {
				t.Fatal("DocFreq() != nil without a df table")
			} else {
				checkSketchTerms(t, nodf, &mime.Document{Subject: "Cheap meds", Text: "cheap MEDS online today"}, mime.TokenOptions{})
			}
			for _, f := range files {
				raw, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				doc := mime.Parse(raw, mime.Options{})
				checkSketchTerms(t, s, doc, mime.TokenOptions{})
				checkSketchTerms(t, s, doc, mime.TokenOptions{MinLen: 2, MaxDigits: 3})
			}
			checkSketchTerms(t, s, &mime.Document{}, mime.TokenOptions{})
			if s.DocFreq() == nil {
				t.Fatal("DocFreq() = nil")
			}
			if sk := s.SketchTerms(nil, nil); !sk.IsEmpty() {
				t.Fatalf("SketchTerms(nil, nil) = %v", sk)
			}
			if v := s.WeighTerms(nil, nil); len(v) != 0 {
				t.Fatalf("WeighTerms(nil, nil) = %v", v)
			}
			_ = s.SketchTerms(nil, mime.Analyze(nil, mime.TokenOptions{}))
		})
	}
}

// FuzzSketchTerms checks the one-pass analysis path against the token
// path on arbitrary text.
func FuzzSketchTerms(f *testing.F) {
	f.Add("Cheap MEDS", "Buy cheap meds online, CHEAP Meds www.pharma.example/x today", "http://pharma.example/x")
	f.Add("", "", "")
	f.Add("ÀÉÎ offer", "\x00\xff\xfe日本語 テキスト Price PRICE price", "http://[::1]:80/%zz")
	s, err := NewSigner(testModel(), testDF())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, subj, text, url string) {
		doc := &mime.Document{Subject: subj, Text: text, URLs: []string{url}, Hosts: []string{url}}
		checkSketchTerms(t, s, doc, mime.TokenOptions{})
	})
}

// BenchmarkWeighSketchTerms is BenchmarkWeighSketch through mime.Analyze
// (the analysis itself excluded, as the tokenization is there).
func BenchmarkWeighSketchTerms(b *testing.B) {
	docs, toks, s := benchSigner(b, 0)
	ans := make([]*mime.Terms, len(docs))
	for i, d := range docs {
		ans[i] = mime.Analyze(d, mime.TokenOptions{})
	}
	loop(b, docs, toks, s, func(i int) { s.SketchTerms(docs[i], ans[i]) })
}
