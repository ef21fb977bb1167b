package shortsig

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/mime"
	"github.com/nddmilter/nddmilter/internal/testutil"
)

// resultString is r in a form that does not share memory with r.
func resultString(r Result) string {
	return fmt.Sprintf("%v %x %x %d %d %d", r.Short, r.Keys, r.Lookup, r.Media, r.Links, r.Units)
}

// TestConcurrentResultsStable signs documents from several goroutines
// with one Signer, whose scratch memory (units, their strings, links,
// keys) is pooled, and checks every result, read after all signing is
// done, against a signing of its own: a result must not share memory
// that a later message overwrites (run with -race as well).
func TestConcurrentResultsStable(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	var docs []*mime.Document
	for i := range 60 {
		words := strings.Fields(randomWords(3+r.IntN(900), uint64(i)))
		for j := range words {
			if r.IntN(3) == 0 {
				words[j] = strings.ToUpper(words[j][:1]) + words[j][1:]
			}
		}
		d := &mime.Document{
			Subject: "Offer " + words[0],
			Text:    "Hello,\n" + strings.Join(words, " "),
		}
		for k := range r.IntN(4) {
			d.URLs = append(d.URLs, fmt.Sprintf("http://www.site%d.example.com/Path/%d/", i%7, k))
		}
		docs = append(docs, d)
	}
	for i := range goldenDocs {
		docs = append(docs, &goldenDocs[i].doc)
	}
	want := make([]string, len(docs))
	for i, d := range docs {
		want[i] = resultString(New(Options{}).Sign(d))
	}
	s := New(Options{})
	testutil.SameWhenConcurrent(t, want, 4, 5, func(i int) Result { return s.Sign(docs[i]) }, resultString)
}
