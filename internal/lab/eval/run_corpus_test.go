package eval

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/nddmilter/nddmilter/internal/imatchbag"
)

// TestCorpusManual runs the experiments on a real corpus when NDD_CORPUS
// names one (e.g. .cache/spamassassin); it is skipped otherwise.
// NDD_CORPUS_LEX=self builds the lexicon from the corpus's ham instead of
// using the embedded one.
func TestCorpusManual(t *testing.T) {
	dir := os.Getenv("NDD_CORPUS")
	if dir == "" {
		t.Skip("NDD_CORPUS not set")
	}
	c, err := LoadCorpus(dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	opts := AccuracyOptions{Seeds: 1, Log: slog.Default()}
	if os.Getenv("NDD_CORPUS_LEX") == "self" {
		b := imatchbag.NewBuilder()
		for i := range c.Docs {
			if c.Docs[i].Class == Ham {
				b.Add(c.Docs[i].Terms)
			}
		}
		lex, err := b.Build(imatchbag.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		opts.Lexicon = lex
	}
	res, err := RunAccuracy(context.Background(), c, opts)
	if err != nil {
		t.Fatal(err)
	}
	res.WriteMarkdown(os.Stdout)
	adv, err := RunAdversarial(context.Background(), c, AdversarialOptions{Accuracy: opts})
	if err != nil {
		t.Fatal(err)
	}
	adv.WriteMarkdown(os.Stdout)
}
