package andd

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/mime"
	"github.com/nddmilter/nddmilter/internal/testutil"
)

// TestConcurrentResultsStable signs documents with links (host terms,
// URL words) from several goroutines with one Signer, whose extraction
// memory is pooled, and checks every sketch, band key and weighted
// vector, read after all signing is done, against a signing of its own:
// nothing returned may share memory that a later message overwrites
// (run with -race as well).
func TestConcurrentResultsStable(t *testing.T) {
	m, err := DefaultModel()
	if err != nil {
		t.Fatal(err)
	}
	newSigner := func() *Signer {
		s, err := NewSigner(m, testDF())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	r := rand.New(rand.NewPCG(43, 44))
	var docs []*mime.Document
	for i := range 40 {
		var words []string
		for range 20 + r.IntN(200) {
			words = append(words, randWord(r))
		}
		var urls []string
		for k := range r.IntN(5) {
			urls = append(urls, fmt.Sprintf("https://www.%s.Example%d.co.uk/%s/%d", words[k], i%5, words[k+1], k))
		}
		doc, _ := testDoc("Offer "+words[0], strings.Join(words, " "), urls...)
		docs = append(docs, doc)
	}
	type result struct {
		sk   Sketch
		keys [][]byte
		v    Vector
	}
	sign := func(s *Signer, doc *mime.Document) result {
		an := mime.Analyze(doc, mime.TokenOptions{})
		sk := s.SketchTerms(doc, an)
		return result{sk, s.BandKeys(sk), s.WeighTerms(doc, an)}
	}
	str := func(r result) string { return fmt.Sprintf("%x %x %x %v", r.sk.Bits, r.sk.MinHash, r.keys, r.v) }
	want := make([]string, len(docs))
	hosts := 0
	for i, d := range docs {
		res := sign(newSigner(), d)
		want[i] = str(res)
		for term := range res.v {
			if strings.HasPrefix(term, hostPrefix) {
				hosts++
			}
		}
	}
	if hosts == 0 {
		t.Fatal("no host term weighted: the test does not test them")
	}
	s := newSigner()
	testutil.SameWhenConcurrent(t, want, 4, 3, func(i int) result { return sign(s, docs[i]) }, str)
}
