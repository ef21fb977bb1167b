package eval

import (
	"fmt"
	"os"
	"testing"

	"github.com/nddmilter/nddmilter/internal/mime"
	"github.com/nddmilter/nddmilter/internal/qgram"
)

func TestZZQPair(t *testing.T) {
	if os.Getenv("QPAIR") == "" {
		t.Skip()
	}
	c, err := LoadCorpus("../../.cache/spamassassin", LoadOptions{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	sk := qgram.NewSketcher(qgram.SketchOptions{})
	owners := map[string][]int{}
	nspam := 0
	for i := range c.Docs {
		d := &c.Docs[i]
		if d.Class != Spam {
			continue
		}
		doc := mime.Parse(d.Raw, mime.Options{})
		s, ok := sk.Sketch(doc.Subject, "\n", doc.Text)
		if !ok {
			continue
		}
		nspam++
		for _, k := range qgram.BandKeys(&s) {
			owners[string(k)] = append(owners[string(k)], i)
		}
	}
	pairs, nham := 0, 0
	for i := range c.Docs {
		d := &c.Docs[i]
		if d.Class != Ham {
			continue
		}
		doc := mime.Parse(d.Raw, mime.Options{})
		s, ok := sk.Sketch(doc.Subject, "\n", doc.Text)
		if !ok {
			continue
		}
		nham++
		hit := map[int]bool{}
		for _, k := range qgram.BandKeys(&s) {
			for _, j := range owners[string(k)] {
				hit[j] = true
			}
		}
		pairs += len(hit)
	}
	fmt.Printf("spam %d ham %d candidate pairs %d: %.5f per pair, %.2f campaigns per ham\n", nspam, nham, pairs, float64(pairs)/float64(nspam*nham), float64(pairs)/float64(nham))
}
